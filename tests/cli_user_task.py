"""A module of one's own that registers a task and an experiment when imported.

What ``stsq-learn fit --import tests/cli_user_task.py --task test_pair_mean``
loads (``tests/test_cli.py``): the pair-mean task of ``user_tasks`` with the
throwaway experiment ``test_level`` of ``seed_experiments``, registered by
the one call a task of one's own makes. The worker processes of a parallel
``reproduce`` import it by name, as they import any experiment's module.
"""

import seed_experiments
from user_tasks import PairMeanTask, make_test_pair_mean

from stsq_learn import registry

registry.register(PairMeanTask, make=make_test_pair_mean, experiments=(seed_experiments.LEVEL,))
