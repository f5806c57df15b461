"""Small pure pieces of the reset executor and the operator's kopf settings, with plain data."""

from __future__ import annotations

from typing import Any

import kopf

from connectops.diffbase import DigestDiffBaseStorage
from connectops.reconcilers.reset_changes import confirmation
from connectops.reconcilers.reset_run import backup_name

# Connect 4.3's answers (ConnectorsResource / AbstractHerder), verbatim
CONFIRMED = "The offsets for this connector have been altered successfully"
FRAMEWORK_ONLY = (
    "The Connect framework-managed offsets for this connector have been altered successfully. However, if this "
    "connector manages offsets externally, they will need to be manually altered in the system that the connector uses."
)


def test_connects_answer_says_whether_the_connector_confirmed() -> None:
    assert confirmation(CONFIRMED) is True
    assert confirmation(CONFIRMED.replace("altered", "reset")) is True
    assert confirmation(FRAMEWORK_ONLY) is False
    assert confirmation("something else") is None


def test_backup_names_differ_for_long_names_and_fit() -> None:
    stem = "r" * 235
    a = backup_name("ns", stem + "-first", "uid-1")
    b = backup_name("ns", stem + "-second", "uid-2")
    assert a != b
    assert max(len(a), len(b)) <= 253
    assert backup_name("ns", "x", "u") == backup_name("ns", "x", "u")
    assert backup_name("ns", "x", "u") != backup_name("other", "x", "u")


def _body(spec: dict[str, Any], annotations: dict[str, str] | None = None) -> kopf.Body:
    return kopf.Body(
        {
            "apiVersion": "connectops.io/v1alpha1",
            "kind": "Connector",
            "metadata": {"name": "c", "namespace": "n", "annotations": annotations or {}},
            "spec": spec,
            "status": {"anything": 1},
        }
    )


def test_diff_base_is_digests_that_change_with_their_stanza() -> None:
    storage = DigestDiffBaseStorage(prefix="connectops.io", key="last-handled-configuration")
    big = {"config": {"pad": "x" * 1_000_000}}
    essence = storage.build(body=_body(big, {"team": "a"}))
    assert len(str(essence)) < 400  # a 1 MB spec is not copied
    assert set(essence) == {"spec", "metadata"}
    same = storage.build(body=_body(big, {"team": "a"}))
    assert same == essence
    changed_spec = storage.build(body=_body({"config": {"pad": "y"}}, {"team": "a"}))
    assert changed_spec["spec"] != essence["spec"]
    assert changed_spec["metadata"] == essence["metadata"]
    changed_label = storage.build(body=_body(big, {"team": "b"}))
    assert changed_label["spec"] == essence["spec"]
    assert changed_label["metadata"] != essence["metadata"]
