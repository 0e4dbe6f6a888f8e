"""TensorScope's own warning filters leave the script's shown warnings shown:
a library's ``"default"`` warning plain ``python`` prints once is printed once."""
from __future__ import annotations

import warnings

from tensorscope.hooks import compiled
from tensorscope.hooks.diagnostics import scaler
from tensorscope.hooks.warning_filters import add_filter, remove_filter, warnings_ignored


def _library() -> dict:
    """A module of its own (its own ``__warningregistry__``) with a deprecated call."""
    g: dict = {"__name__": "some_library"}
    exec("import warnings\n"
         "def old_api():\n"
         "    warnings.warn('old_api is deprecated', DeprecationWarning)\n", g)
    return g


def _shown(between) -> list[str]:
    lib = _library()
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("default")
        lib["old_api"]()
        between()
        lib["old_api"]()
        lib["old_api"]()
    return [str(w.message) for w in log]


def test_a_walk_for_grad_scalers_does_not_show_a_warning_again(monkeypatch):
    monkeypatch.setitem(scaler._LIVE, "at", -1e9)   # the walk is due
    assert _shown(scaler.live_scalers) == ["old_api is deprecated"]


def test_the_compile_warning_filter_does_not_show_a_warning_again():
    def install_and_remove() -> None:
        f = compiled.CompileWarningFilter()
        assert f.active
        f.remove()

    assert _shown(install_and_remove) == ["old_api is deprecated"]


def test_ignored_warnings_are_ignored_on_the_way_and_not_remembered():
    def inside() -> None:
        with warnings_ignored():
            warnings.warn("inside", UserWarning, stacklevel=1)
            lib["old_api"]()

    lib = _library()
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("default")
        before = list(warnings.filters)
        inside()
        assert warnings.filters == before
        lib["old_api"]()   # ignored inside the block, so not yet shown: shown now
    assert [str(w.message) for w in log] == ["old_api is deprecated"]


def test_remove_filter_takes_out_its_own_entry_not_an_equal_one():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=RuntimeWarning)
        theirs = warnings.filters[0]
        ours = add_filter("ignore", "", RuntimeWarning)
        assert ours == theirs and ours is not theirs
        remove_filter(ours)
        assert warnings.filters[0] is theirs
        remove_filter(ours)   # gone already: nothing happens
        assert warnings.filters[0] is theirs
