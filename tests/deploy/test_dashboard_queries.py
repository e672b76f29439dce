"""The Helm chart's dashboard (deploy/helm/pwevent/files/grafana-dashboard.json): the budget panel's
query, as Grafana sends it with the dashboard's variables filled in, evaluated by Debian's promtool on
series of two deployments: it shows each window bucket of its own deployment only, the largest share
any TaskManager reports, as a share of the window budget (docs/operations.md, "Metrics")."""

from __future__ import annotations

import json
from pathlib import Path

from tests.deploy.test_rules import P, run_unit_tests

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "pwevent" / "files" / "grafana-dashboard.json"


def panel_query(title_start: str) -> str:
    """The query of the dashboard panel whose title starts so, with its variables as Grafana fills them."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    [panel] = [p for p in panels if p["title"].startswith(title_start)]
    [target] = panel["targets"]
    return str(target["expr"]).replace("$namespace", "prod").replace("$job", "pwevent")


def test_the_budget_panel_shows_each_window_bucket_of_its_deployment(tmp_path: Path) -> None:
    query = panel_query("Budget utilisation per window bucket")
    series = {  # ppm per bucket; two TaskManager series of one deployment, and another deployment's
        f'{P}window_budget_utilisation_ppm{{namespace="prod", job="pwevent", window="w10_99", tm_id="a"}}':
            "0 250000 750000",
        f'{P}window_budget_utilisation_ppm{{namespace="prod", job="pwevent", window="w10_99", tm_id="b"}}':
            "0 100000 100000",
        f'{P}window_budget_utilisation_ppm{{namespace="prod", job="pwevent", window="w100_999", tm_id="a"}}':
            "1000000 1000000 500000",
        f'{P}window_budget_utilisation_ppm{{namespace="prod", job="other", window="w10_99", tm_id="a"}}':
            "999999 999999 999999",
    }
    checks = [{"expr": query, "eval_time": f"{minute}m",
               "exp_samples": [{"labels": '{window="w10_99"}', "value": w10}, {"labels": '{window="w100_999"}',
                                                                               "value": w100}]}
              for minute, w10, w100 in ((0, 0, 1.0), (1, 0.25, 1.0), (2, 0.75, 0.5))]
    test = {"interval": "1m", "input_series": [{"series": k, "values": v} for k, v in series.items()],
            "promql_expr_test": checks}
    done = run_unit_tests({"rules.yml": {"groups": []}}, [test], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
