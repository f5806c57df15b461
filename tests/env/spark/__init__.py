"""Test stand-ins for the kubeflow spark-operator: its real SparkApplication CRD and a controller.

* ``sparkapplications-crd.yaml``: the upstream CRD, verbatim (source, commit and what the test
  kube-apiserver 1.20 does with it: :mod:`tests.env.spark.crd`).
* :func:`tests.env.spark.crd.apply_sparkapplication_crd`: creates it and waits until served.
* :class:`tests.env.spark.harness.FakeSparkOperator`: drives SparkApplications' status like the
  upstream controller and runs the PySpark check job locally (states, status fields and
  transitions: :mod:`tests.env.spark.harness`).
"""
