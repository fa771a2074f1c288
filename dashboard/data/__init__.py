"""Cached data of the dashboard, by concept: :mod:`.datasets` (loading and validation), :mod:`.dataset_moments` (the
moments of each dataset), :mod:`.overview` (facts fixed per dataset), :mod:`.analyses` (analysis results on those moments), :mod:`.page_defaults` (the choices a page derives before it computes),
:mod:`.heldout` (the model zoo, the estimator lab and uploaded qrels / runs) and :mod:`.warmup` (the
pages' default results prepared in the background once a dataset is loaded). Pages use
``from dashboard import data`` and ``data.<name>``."""

from dashboard.data.analyses import *  # noqa: F403
from dashboard.data.analyses import __all__ as _analyses_all
from dashboard.data.datasets import *  # noqa: F403
from dashboard.data.datasets import __all__ as _datasets_all
from dashboard.data.dataset_moments import *  # noqa: F403
from dashboard.data.dataset_moments import __all__ as _dataset_moments_all
from dashboard.data.heldout import *  # noqa: F403
from dashboard.data.heldout import __all__ as _heldout_all
from dashboard.data.overview import *  # noqa: F403
from dashboard.data.overview import __all__ as _overview_all
from dashboard.data.page_defaults import *  # noqa: F403
from dashboard.data.page_defaults import __all__ as _page_defaults_all
from dashboard.data.warmup import *  # noqa: F403
from dashboard.data.warmup import __all__ as _warmup_all

__all__ = [*_datasets_all, *_dataset_moments_all, *_analyses_all, *_heldout_all, *_overview_all, *_page_defaults_all, *_warmup_all]
