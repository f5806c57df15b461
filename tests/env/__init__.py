"""Real test servers (etcd + kube-apiserver, Apache Kafka, Kafka Connect) for end-to-end tests and demos.

Provisioned by ``tests/env/provision.sh``; started by :mod:`tests.env.servers`.
"""
