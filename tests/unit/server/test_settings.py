"""ServerSettings on pydantic-settings: keywords as before, TEOLA_* variables through from_env, errors
naming the field or the variable."""

from __future__ import annotations

import pytest

from teola.server import ServerSettings


def test_keyword_construction_reads_no_environment(monkeypatch):
    monkeypatch.setenv("TEOLA_API_KEY", "from-env")
    assert ServerSettings(documents="memory").api_key is None
    assert ServerSettings.from_env().api_key == "from-env"
    assert ServerSettings.from_env(api_key="given").api_key == "given"
    assert ServerSettings.from_env(api_key=None).api_key == "from-env"  # None overrides are ignored


@pytest.mark.parametrize(
    "raw, value", [("1", True), ("yes", True), ("ON", True), ("0", False), ("off", False)]
)
def test_booleans_from_the_environment(raw, value):
    assert ServerSettings.from_env({"TEOLA_START_ENGINES": raw}).start_engines is value


def test_empty_unrelated_and_extra_variables_are_ignored():
    s = ServerSettings.from_env({"TEOLA_PG_DSN": "", "TEOLA_EXTRA": "not json", "HOME": "/root"})
    assert s.pg_dsn is None and s.extra == {}


@pytest.mark.parametrize(
    "environ, message",
    [
        (
            {"TEOLA_QUERY_TIMEOUT": "soon"},
            "environment variable TEOLA_QUERY_TIMEOUT='soon' is not a valid float",
        ),
        ({"TEOLA_START_ENGINES": "maybe"}, "TEOLA_START_ENGINES='maybe' is not a valid bool"),
        ({"TEOLA_MAX_DOCUMENTS": "0"}, "ServerSettings.max_documents must be an int >= 1, got 0"),
    ],
)
def test_a_bad_variable_is_named(environ, message):
    with pytest.raises(ValueError, match=message):
        ServerSettings.from_env(environ)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"max_documents": "5"}, "ServerSettings.max_documents: input should be a valid integer, got '5'"),
        ({"start_engines": 1}, "ServerSettings.start_engines: input should be a valid boolean"),
        ({"bogus": 1}, "unknown server setting 'bogus'"),
        ({"compile_queue": -1}, "ServerSettings.compile_queue must be an int >= 0"),
    ],
)
def test_a_bad_keyword_is_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ServerSettings(**kwargs)
    if "bogus" in kwargs:
        with pytest.raises(ValueError, match=r"unknown server setting\(s\) \['bogus'\]"):
            ServerSettings.from_env({}, **kwargs)


def test_assignment_is_validated_like_construction():
    s = ServerSettings()
    s.malloc_arenas = 0
    assert s.malloc_arenas == 0
    with pytest.raises(ValueError, match="ServerSettings.malloc_arenas must be an int >= 0, got -1"):
        s.malloc_arenas = -1
    assert ServerSettings(query_timeout=30).query_timeout == 30.0
