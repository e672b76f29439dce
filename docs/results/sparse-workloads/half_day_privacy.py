"""The black-box privacy test (`pwevent privacy-test`'s Scenario and bounds, docs/privacy-test.md) at a
burst a day offset moved: Adaptive with 2 slots in a day, window 4, held in bursts (level_margin 1e9:
the scenario's two cells would read as dense), so the bursts are at 1, 2 and 7 (6 without the
offset); t* = 7, where the target spends its whole E = 4. Written for the half-day rule (../README.md,
"The other half of the day"); under "A quarter of a day" (the default since) the gap is P plus a
quarter of a day, at least one slot: the same slots, and the same result (eps_lb 3.857 against 4).

    .venv/bin/python docs/results/sparse-workloads/half_day_privacy.py
"""
import numpy as np
from pwevent.jobs.common.engine import Engine
from pwevent.jobs.offline import privacy_test as pt
from pwevent.operators.noise import NumpyRandomness
from pwevent.operators.registry import REGISTRY


class DayScenario(pt.Scenario):
    def spec(self):
        return REGISTRY.spec(self.mechanism, self.window, self.epsilon, {"level_margin": 1e9}, day=2)


sc = DayScenario("Adaptive", slot=7)
eng = Engine(sc.spec(), sc.d, NumpyRandomness(1), sc.window, last_release=np.array([sc.users, 0]))
for u in range(sc.users):
    eng.register(u, sc.requirement(u), 1)
for t in range(1, 8):
    o, _ = eng.step(t, np.arange(sc.users), np.zeros(sc.users, dtype=np.int64) if t < 7 else np.ones(sc.users, dtype=np.int64))
    print(t, o.kind.value, o.family, eng.population.get(eng.class_of(0)).ledger.spent(t, t))
result = pt.privacy_test(sc, runs=10_000, selection_runs=2_500, seed=11)
print(pt.render([result]))
