"""Start-up checks: configuration the desk cannot run correctly with, said before the first run fails."""

from django.core import checks

from support.desk.assistant import model_price_problem


@checks.register()
def model_is_priced(app_configs, **kwargs):
    problem = model_price_problem()
    if not problem:
        return []
    return [checks.Error(f"Runs will be refused: {problem}.", id="support.E001")]
