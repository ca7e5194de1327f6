"""nofall: Mitra, TabSTAR and SpTransformer inference on libnofall.

- ``MitraClassifier`` / ``MitraRegressor``: scikit-learn estimators. ``fit``
  stores the support set and fits AutoGluon's preprocessing (as
  ``nofall predict`` does, in the C library); ``predict_proba`` /
  ``predict`` run one forward per ensemble member.
- ``TabSTARClassifier`` / ``TabSTARRegressor``: the same conventions over
  TabSTAR's verbalizer (as ``nofall predict`` on a TabSTAR model directory);
  ``predict_proba`` / ``predict`` verbalize the rows and run one forward.
- ``SpTransformer``: a SpTransformer model on a device; ``score`` (sequences),
  ``score_fasta`` (a FASTA file or region) return numpy arrays (``SpliceScores``:
  the logits, probabilities and classes ``nofall run`` writes).
- ``annotate``: a VCF's SNVs scored into a .vcf/.vcf.gz/.bcf/.tsv/.csv file (as
  ``nofall annotate``, byte for byte), the counts returned; ``annotate_frame``:
  the same as a pandas DataFrame.
- ``Model``: a checkpoint loaded once onto a device; ``forward`` on numpy
  arrays; the op trace (``trace_totals``, ``trace_json``) and placement
  (``info``).
- ``NofallError`` (``NofallInputError`` for bad input, also a ValueError):
  the library's errors, with ``code``, ``code_name`` and the message.
"""
from ._nofall import NofallError, NofallInputError, devices, gen_weights, read_mirror_signs
from ._nofall import __version__
from ._model import Model
from ._estimators import MitraClassifier, MitraRegressor
from ._tabstar import TabSTARClassifier, TabSTARRegressor
from ._sptransformer import SpTransformer, SpliceScores, annotate, annotate_frame

__all__ = ["MitraClassifier", "MitraRegressor", "TabSTARClassifier", "TabSTARRegressor", "SpTransformer",
           "SpliceScores", "annotate", "annotate_frame", "Model", "NofallError", "NofallInputError", "devices",
           "gen_weights", "read_mirror_signs", "__version__"]
