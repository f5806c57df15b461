from connectops.redact import MASK, Redactor


def test_masks_longest_first_and_ignores_trivial_values() -> None:
    r = Redactor(["s3cr3t", "s3cr3t-long", "1"])
    assert r("a s3cr3t-long and s3cr3t, 1") == f"a {MASK} and {MASK}, 1"
    assert not Redactor([""])


def test_include_merges() -> None:
    a, b = Redactor(["alpha-secret"]), Redactor(["beta-secret"])
    a.include(b)
    assert a("alpha-secret beta-secret") == f"{MASK} {MASK}"
