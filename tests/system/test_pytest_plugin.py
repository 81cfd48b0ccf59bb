"""parkway's pytest plugin, as a user's project meets it: installed with parkway, its
fixtures there without a conftest (pytester runs pytest in a process of its own)."""

from __future__ import annotations

import textwrap

import pytest

pytest_plugins = ["pytester"]

INI = """
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
{extra}
"""

APP = """
from parkway import Engine

# The application's engine, on its production database (never touched by the tests).
engine = Engine("sqlite:///production.db")


@engine.workflow()
async def reminder(ctx, input):
    await ctx.sleep("1d")
    return await ctx.step(lambda: f"reminded {input['who']}", name="remind")


@engine.workflow()
async def approval(ctx, input):
    return await ctx.wait_for_signal("approve")
"""


def test_the_engine_and_clock_fixtures_run_a_workflow_in_a_day_of_manual_time(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".ini", pytest=INI.format(extra=""))
    pytester.makepyfile(
        test_reminders=textwrap.dedent(
            """
            from parkway import Engine, RunStatus
            from parkway.testing import ManualClock


            async def test_a_reminder_fires_after_a_day(parkway_engine, parkway_clock):
                assert isinstance(parkway_engine, Engine) and parkway_engine.is_open
                assert isinstance(parkway_clock, ManualClock)

                @parkway_engine.workflow()
                async def nudge(ctx, input):
                    await ctx.sleep("1d")
                    return "nudged"

                handle = await parkway_engine.start("nudge")
                await parkway_engine.idle()
                assert (await handle.info()).status == RunStatus.PARKED
                await parkway_clock.advance("1d")
                assert await handle.result(timeout=5) == "nudged"


            async def test_each_test_has_an_engine_of_its_own(parkway_engine):
                assert await parkway_engine.list_runs() == []
            """
        )
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_the_app_fixture_runs_the_application_s_own_engine_on_a_store_of_its_own(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".ini", pytest=INI.format(extra="parkway_app = shopapp:engine"))
    pytester.makepyfile(shopapp=APP)
    pytester.makepyfile(
        test_shop=textwrap.dedent(
            """
            import shopapp


            async def test_the_reminder_of_the_application(parkway_app, parkway_clock):
                assert parkway_app is shopapp.engine  # the very engine the app imports
                assert parkway_app.url == "memory://"
                handle = await shopapp.engine.start("reminder", {"who": "ann"}, id="r1")
                await parkway_clock.advance("1d")
                assert await handle.result(timeout=5) == "reminded ann"


            async def test_nothing_is_left_from_the_test_before(parkway_app):
                assert await parkway_app.list_runs() == []
                handle = await parkway_app.start("approval", id="a1")
                await parkway_app.signal("a1", "approve", "yes")
                assert await handle.result(timeout=5) == "yes"


            def test_afterwards_the_engine_is_the_application_s_again():
                assert shopapp.engine.url == "sqlite:///production.db"
                assert not shopapp.engine.is_open
            """
        )
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    assert not (pytester.path / "production.db").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("", "the parkway_app fixture needs `parkway_app = module:engine`"),
        ("parkway_app = shopapp", "parkway_app = 'shopapp': use module:attribute"),
        ("parkway_app = nowhere:engine", "cannot import nowhere"),
        ("parkway_app = shopapp:approval", "shopapp.approval is function, not a parkway Engine"),
    ],
)
def test_a_missing_or_wrong_app_option_says_what_to_set(
    pytester: pytest.Pytester, extra: str, message: str
) -> None:
    pytester.makefile(".ini", pytest=INI.format(extra=extra))
    pytester.makepyfile(shopapp=APP)
    pytester.makepyfile(
        test_shop="async def test_it(parkway_app):\n    pass\n",
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*{message}*"])
