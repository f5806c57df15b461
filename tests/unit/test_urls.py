"""The URL allowlist's grammar (hosts matched as hosts, after parsing), the places refused
without one, and URLs' credentials kept out of every text."""

from __future__ import annotations

import logging
import re

import pytest
import yaml

from connectops import crdgen
from connectops.planning.urls import ApiServer, UrlPolicy, UrlRefused, parse_entry, parse_target, url_allowed
from connectops.redact import MASK, Redactor, mask_logged_userinfo, redact_url, redact_userinfo, without_userinfo

PORT = 18083
API = ApiServer("127.0.0.1", 6443)


def admitted(url: str, *entries: str, api: tuple[ApiServer, ...] = (API,)) -> bool:
    return UrlPolicy.build(entries, api).check_url(url) is None


# -- the grammar --------------------------------------------------------------------------------


def test_a_dns_name_that_only_looks_like_an_allowed_address_is_refused() -> None:
    # the old shell glob matched across dots: 127.0.0.* admitted 127.0.0.1.attacker.example
    for entries in ([f"http://127.0.0.*:{PORT}"], [f"http://127.0.0.0/24:{PORT}"], [f"http://127.0.0.1:{PORT}"]):
        assert not admitted(f"http://127.0.0.1.attacker.example:{PORT}", *entries), entries
    # an address entry admits addresses only, and the glob is no entry at all
    assert admitted(f"http://127.0.0.1:{PORT}", f"http://127.0.0.0/24:{PORT}")
    assert not admitted(f"http://127.0.0.1:{PORT}", f"http://127.0.0.*:{PORT}")
    assert not admitted(f"http://localhost:{PORT}", f"http://127.0.0.1:{PORT}")


def test_an_allowlist_of_only_unusable_entries_admits_nothing() -> None:
    policy = UrlPolicy.build([f"http://127.0.0.*:{PORT}"])
    assert policy.restricted
    refused = policy.check_url(f"http://127.0.0.1:{PORT}")
    assert refused is not None
    assert "no usable entry" in refused
    assert "127.0.0.0/24" in refused  # the hint: what the entry meant


def test_ipv6_entries_match() -> None:
    assert admitted(f"http://[::1]:{PORT}", f"http://[::1]:{PORT}")
    assert admitted(f"http://[::1]:{PORT}/connectors", f"http://[::1]:{PORT}/")
    assert not admitted(f"http://[::1]:{PORT + 1}", f"http://[::1]:{PORT}")
    assert not admitted(f"http://127.0.0.1:{PORT}", f"http://[::1]:{PORT}")
    assert admitted(f"http://[fd12:3456::7]:{PORT}", f"http://[fd12:3456::/32]:{PORT}")
    assert not admitted(f"http://[fd12:3457::7]:{PORT}", f"http://[fd12:3456::/32]:{PORT}")


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://10.1.2.3:8083", True),
        ("http://10.255.255.255:8083", True),
        ("http://11.0.0.1:8083", False),
        ("http://[::ffff:10.1.2.3]:8083", True),  # an IPv4 address written as IPv6 is that address
        ("http://10.1.2.3.nip.io:8083", False),  # a name, whatever it spells
        ("http://10.1.2.3:9999", False),
    ],
)
def test_cidr_ranges(url: str, allowed: bool) -> None:
    assert admitted(url, "http://10.0.0.0/8:8083") is allowed


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://main.connect.svc.cluster.local:8083", True),
        ("https://main.connect.svc.cluster.local:8083/", True),
        ("https://MAIN.connect.svc.cluster.local:8083", True),  # host names are case-insensitive
        ("https://main.connect.svc.cluster.local.:8083", True),  # the root's dot
        ("https://a.b.connect.svc.cluster.local:8083", True),  # any name under it
        ("https://connect.svc.cluster.local:8083", False),  # not the name itself
        ("https://xconnect.svc.cluster.local:8083", False),  # a whole label, never part of one
        ("https://main.connect.svc.cluster.local.evil.example:8083", False),
        ("https://evil.example/x.connect.svc.cluster.local:8083", False),  # a path is not a host
        ("https://evil.example#.connect.svc.cluster.local:8083", False),
        ("https://evil.example?.connect.svc.cluster.local:8083", False),
        ("http://main.connect.svc.cluster.local:8083", False),  # scheme
        ("https://main.connect.svc.cluster.local:9999", False),  # port
        ("https://10.0.0.1:8083", False),  # an address is no name
    ],
)
def test_a_wildcard_is_a_whole_leading_label(url: str, allowed: bool) -> None:
    assert admitted(url, "https://*.connect.svc.cluster.local:8083") is allowed


def test_ports() -> None:
    assert admitted("http://connect.kafka", "http://connect.kafka")  # 80 both
    assert admitted("http://connect.kafka:80", "http://connect.kafka")
    assert not admitted("http://connect.kafka:8083", "http://connect.kafka")
    assert admitted("http://connect.kafka:8083", "http://connect.kafka:*")
    assert admitted("https://connect.kafka", "https://connect.kafka:443")
    assert not admitted("http://connect.kafka:notaport", "http://connect.kafka:*")


@pytest.mark.parametrize(
    "entry",
    [
        "http://127.0.0.*:8083",  # a glob in an address
        "http://connect-*.kafka:8083",  # a glob inside a label
        "http://*connect.kafka:8083",
        "http://connect.*.kafka:8083",  # a wildcard that does not lead
        "http://*:8083",
        "http://::1:8083",  # IPv6 without brackets
        "http://[connect.kafka]:8083",
        "http://[::1:8083",
        "http://user@connect.kafka:8083",
        "http://connect.kafka:8083/path",
        "http://connect.kafka:0",
        "http://connect.kafka:65536",
        "ftp://connect.kafka",
        "connect.kafka:8083",
    ],
)
def test_entries_outside_the_grammar_are_refused(entry: str) -> None:
    with pytest.raises(UrlRefused):
        parse_entry(entry)
    policy = UrlPolicy.build([entry])
    assert len(policy.ignored) == 1
    assert entry in policy.ignored[0]


def test_a_url_is_parsed_as_a_host() -> None:
    assert parse_target("http://[::1]:8083/x").host == "::1"
    assert parse_target("https://Connect.Example.").host == "connect.example"
    assert parse_target("https://connect.example").port == 443
    with pytest.raises(ValueError, match="credentials"):
        parse_target("http://user:secret@connect:8083")
    with pytest.raises(ValueError, match="credentials"):
        parse_target("http://user@connect:8083")


# -- without an allowlist -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://169.254.0.1:8083",
        "http://[fe80::1]:8083",
        "http://[fe80::1%25eth0]:8083",
        "http://100.100.100.200/latest/meta-data/",
        "http://[fd00:ec2::254]/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://METADATA.google.internal./computeMetadata/v1/",
        "https://kubernetes.default.svc",
        "https://kubernetes.default.svc.cluster.local",
        "https://kubernetes.default.svc.corp.example:443",
        "https://kubernetes.default",
        "https://127.0.0.1:6443",  # the API server, where the kubeconfig says it is
        "https://127.0.0.2:6443",  # the same listener through another loopback address
        "https://0.0.0.0:6443",
        "https://[::1]:6443",
    ],
)
def test_metadata_and_the_api_server_are_refused_by_default(url: str) -> None:
    policy = UrlPolicy.build([], [API])
    refused = policy.check_url(url)
    assert refused is not None, url
    assert "settings.allowedRestUrls" in refused
    assert "connect.allowedUrls" not in refused


def test_loopback_is_refused_only_at_the_api_servers_port() -> None:
    # the tests' workers (and sidecar workers) listen on loopback: only the API server's port is off
    assert admitted("http://127.0.0.1:8083")
    assert admitted("http://[::1]:8083")
    assert admitted("http://localhost:6443")  # a name: its addresses are checked as it connects


def test_an_api_server_named_by_its_host_name() -> None:
    policy = UrlPolicy.build([], [ApiServer("api.cluster.example", 6443), ApiServer("10.9.8.7", 6443)])
    assert policy.check_url("https://api.cluster.example:6443") is not None
    assert policy.check_url("https://API.cluster.example.:6443/api") is not None
    assert policy.check_url("https://api.cluster.example:8083") is None
    assert policy.check_url("https://10.9.8.7:6443") is not None
    assert policy.check_url("https://10.9.8.7:8083") is None


def test_only_an_exact_entry_admits_a_refused_place() -> None:
    assert admitted("http://169.254.169.254/", "http://169.254.169.254")
    assert admitted("http://169.254.169.254/", "http://169.254.0.0/16")  # the refused range itself
    assert not admitted("http://169.254.169.254/", "http://0.0.0.0/0")  # every address is not this one
    assert not admitted("http://169.254.169.254/", "http://0.0.0.0/0", "http://10.0.0.1")
    assert admitted("https://127.0.0.1:6443", "https://127.0.0.1:6443")
    assert not admitted("https://127.0.0.1:6443", "https://127.0.0.0/8:*")
    assert admitted("http://metadata.google.internal/", "http://metadata.google.internal")
    assert not admitted("http://metadata.google.internal/", "http://*.google.internal")
    assert admitted("https://kubernetes.default.svc", "https://kubernetes.default.svc")


def test_no_allowlist_admits_any_other_address() -> None:
    for url in ("http://anything:1", "http://10.0.0.1:8083", "https://connect.example", "http://[2001:db8::1]:80"):
        assert url_allowed(url, [])


# -- where a name leads (the adapter asks at every connection) ----------------------------------


def test_a_names_addresses_are_checked_where_it_connects() -> None:
    policy = UrlPolicy.build([], [API])
    guard = policy.guard("http://innocent.example:80")
    assert guard("innocent.example", 80, "10.0.0.5") is None
    refused = guard("innocent.example", 80, "169.254.169.254")
    assert refused is not None
    assert "resolves to 169.254.169.254" in refused
    assert guard("innocent.example", 80, "::ffff:169.254.169.254") is not None
    assert guard("innocent.example", 80, "fe80::1%eth0") is not None
    # a name that leads to the API server's listener, on any loopback address
    api = policy.guard("https://localhost:6443")
    assert api("localhost", 6443, "127.0.0.1") is not None
    assert api("localhost", 6443, "::1") is not None  # a listener on every address has this one too
    assert api("localhost", 8083, "127.0.0.1") is None


def test_a_wildcard_entry_does_not_vouch_for_where_a_name_leads() -> None:
    policy = UrlPolicy.build(["http://*.example.com:80"])
    assert policy.check_url("http://a.example.com") is None
    guard = policy.guard("http://a.example.com")
    assert guard("a.example.com", 80, "10.0.0.5") is None
    assert guard("a.example.com", 80, "169.254.169.254") is not None
    # an entry that names the host exactly does
    exact = UrlPolicy.build(["http://metadata.example.com:80"]).guard("http://metadata.example.com")
    assert exact("metadata.example.com", 80, "169.254.169.254") is None


def test_a_guards_refusal_shows_no_credentials() -> None:
    guard = UrlPolicy.build([]).guard("http://user:hunter22@innocent.example")
    refused = guard("innocent.example", 80, "169.254.169.254")
    assert refused is not None
    assert "hunter22" not in refused


# -- credentials in URLs ------------------------------------------------------------------------


def test_userinfo_is_refused_with_or_without_an_allowlist() -> None:
    for entries in ((), ("http://connect:8083",)):
        refused = UrlPolicy.build(entries).check_url("http://user:hunter22@connect:8083")
        assert refused is not None
        assert "basicAuth" in refused
        assert "hunter22" not in refused


def test_userinfo_is_redacted_in_urls_and_texts() -> None:
    assert redact_url("http://user:hunter22@connect:8083/x?y=1") == f"http://{MASK}@connect:8083/x?y=1"
    assert redact_url("http://connect:8083/a@b") == "http://connect:8083/a@b"  # no user-info there
    assert without_userinfo("https://u:p@[::1]:8083/metrics") == "https://[::1]:8083/metrics"
    text = "GET http://user:hunter22@10.0.0.1:8083/ failed; see https://admin@x.example and mail a@b.example"
    assert redact_userinfo(text) == (
        f"GET http://{MASK}@10.0.0.1:8083/ failed; see https://{MASK}@x.example and mail a@b.example"
    )
    # every text the operator emits passes a Redactor: it masks them whatever secrets it knows
    assert "hunter22" not in Redactor()("cannot reach http://user:hunter22@connect:8083")
    assert "hunter22" not in Redactor(["other-secret"])("'http://u:hunter22@c' and other-secret")


def test_the_crd_refuses_userinfo_at_admission() -> None:
    crd = yaml.safe_load(crdgen.render_all()["connectops.io_connectclusters.yaml"])
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    patterns = [spec["restUrl"]["pattern"], spec["workerMetrics"]["properties"]["urls"]["items"]["pattern"]]
    assert "basicAuth" in spec["workerMetrics"]["properties"]
    for pattern in patterns:
        # the API server's regexp (RE2) and Python's agree on this one: no look-arounds, no backrefs
        matches = re.compile(pattern).search
        for url in ("http://user:secret@connect:8083", "http://user@connect", "https://:pw@[::1]:1/", "http://a b@c"):
            assert matches(url) is None, (pattern, url)
        for url in ("http://connect:8083", "https://[::1]:8083/metrics", "http://c/a@b", "http://c?u=a@b"):
            assert matches(url) is not None, (pattern, url)


def test_log_records_never_hold_a_urls_password() -> None:
    # kopf's debug level logs whole bodies: a spec stored before the schema refused user-info
    logger = logging.getLogger("test.userinfo")
    handler = logging.Handler()
    written: list[str] = []
    handler.emit = lambda record: written.append(logging.Formatter().format(record))  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        mask_logged_userinfo(logger)
        mask_logged_userinfo(logger)  # once is enough: no second filter
        assert len(handler.filters) == 1
        logger.warning("body %r", {"spec": {"restUrl": "http://user:hunter22@connect:8083"}})
        error = ValueError("cannot reach http://user:hunter22@connect:8083")
        logger.error("failed", exc_info=(ValueError, error, None))
    finally:
        logger.removeHandler(handler)
    assert len(written) == 2
    assert all("hunter22" not in line for line in written)
    assert f"http://{MASK}@connect:8083" in written[0]
    assert "ValueError" in written[1]
