"""scikit-learn's estimator checks (parametrize_with_checks) on both
estimators, with a small synthetic checkpoint (64 wide, 2 layers).

Every check that is not expected to pass is listed in EXPECTED_FAILED with
the reason; the estimators' tags also declare poor_score (the synthetic
weights make the predictions meaningless as predictions, so the accuracy /
R^2 thresholds of check_classifiers_train / check_regressors_train are not
applied; the rest of those checks runs)."""
from sklearn.utils.estimator_checks import parametrize_with_checks

import nofall
from conftest import model_dir

_ORDER = ("fp32 rounding: a query row's outputs depend in the last bits on its position in the batch "
          "(measured ~5e-8 absolute, 3e-7 relative on permuted rows, above the check's rtol 1e-7; presumably the "
          "cpu GEMM's row tiling, not traced further). Query rows do not attend to each other, so the values agree "
          "to fp32 rounding")
_SUBSET = ("fp32 rounding, as for the sample order: predicting a subset of the rows runs other GEMM shapes, and "
           "the GEMM library's kernel choice by shape depends on the CPU. Passes on the AMD EPYC machines; on an "
           "Intel Xeon (AVX-512, oneDNN 2.6.3) 2 of 20 regression predictions differed by 7.2e-7 absolute, "
           "1.9e-7 relative, above the check's rtol 1e-7 (README \"Determinism\": equal within rounding)")
EXPECTED_FAILED = {
    "MitraClassifier": {"check_methods_sample_order_invariance": _ORDER, "check_methods_subset_invariance": _SUBSET},
    "MitraRegressor": {"check_methods_sample_order_invariance": _ORDER, "check_methods_subset_invariance": _SUBSET},
}


def _expected(est):
    return EXPECTED_FAILED[type(est).__name__]


@parametrize_with_checks(
    [nofall.MitraClassifier(model_dir("small_cls"), fine_tune=False), nofall.MitraRegressor(model_dir("small_reg"), fine_tune=False)],
    expected_failed_checks=_expected,
)
def test_sklearn_check(estimator, check):
    check(estimator)
