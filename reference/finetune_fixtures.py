#!/usr/bin/env python3
"""Fixtures for Mitra fine-tuning (issue #28): upstream's own trainer, recorded.

This script IMPORTS autogluon.tabular 1.6.3 and runs its own
`MitraClassifier.fit` / `MitraRegressor.fit(X, y, X_val, y_val, time_limit=None)`
(`autogluon/tabular/models/mitra/sklearn_interface.py`) on tiny synthetic
checkpoints made by `nofall gen-weights`; it contains no copy of upstream code.
It only wraps upstream functions to record what they do (spec
shared/specs/finetune.md §4.2):

  * `MitraBase._create_config` wrapped: hyperparams["precision"] = "float32"
    (the CPU `torch.autocast(dtype=float32)` then disables itself; checked in a
    forward hook);
  * `fit` runs inside `sdpa_kernel(MATH)`, `float32_matmul_precision("highest")`,
    TF32 and reduced-precision reductions off; flash-attn is absent;
  * the global numpy RNG is seeded (`np.random.seed(k)`) right before `fit`;
    the Preprocessor's draws (regression mirror, feature mirror) and its
    `pre_nan_mean` / `singular_features` / `y_min` / `y_max` are recorded;
  * the shared `rng` (a `RandomState(get_numpy_seed(seed))`) is replaced by a
    subclass with the same state that logs every outer `permutation` /
    `shuffle` / `choice` call (numerically identical);
  * `make_dataset_split` (as the episode generator sees it) is called with
    x = arange(N) so the episode's row ids are known (x rows are then
    gathered by those ids: the same arrays, the same rng draws);
  * `optimizer.step` wrapped: lr and betas of every step, all grads at step 1,
    exp_avg / exp_avg_sq after step 1, all parameters after every step;
  * forward hooks on Tab2D (inputs and logits of every forward) and on the
    loss module (training loss of every step);
  * `TrainerFinetune.evaluate` wrapped (each epoch's validation loss and
    metric), `EarlyStopping.__call__` (its counter), `Checkpoint.__call__`
    (real clones: the intended best weights, next to upstream's CPU
    "best = last" alias, spec §1.6).
Then `predict_proba(X_test)` (cls) / `predict(X_test)` (reg).

Modes
-----
make [--nofall build/nofall] [--out tests/fixtures/finetune] [--only a,b]
    Regenerates tests/fixtures/finetune/<case>/{inputs,expected}.safetensors
    and case.json (format: reference/README.md, "finetune_fixtures.py").
selftest [--out tests/fixtures/finetune] [--only a,b] [--nofall build/nofall]
    (implemented in finetune_cases.py, with the cases, the data generator and
    the strict safetensors writer/reader) Re-checks each committed case without running the trainer: the strict
    safetensors conventions, the rng replay (upstream's own split functions
    on a fresh RandomState give the recorded ids), the preprocessing, AdamW's
    step-1 moments from the recorded grads, the LR sequence, best epoch vs
    val_loss. With a nofall binary (optional) it recreates the weights and
    checks step 1 bit-exactly (w1 = AdamW(w0, grad)).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from finetune_cases import (CASES, DEFAULT_NOFALL, DEFAULT_OUT, F, SEED, gen_weights, make_data,  # noqa: E402
                            selftest, st_write, torch_fp32, versions)


# --------------------------------------------------------------------------
# the recorder
# --------------------------------------------------------------------------

class Recorder:
    def __init__(self):
        self.log = []        # outer rng calls: dict(phase, kind, n, out)
        self.depth = 0
        self.phase = "init"
        self.n_split = 0
        self.n_eval = 0
        self.splits = {}     # epoch -> (idx_support_pool, idx_query_pool, path)
        self.perms = {}      # (phase, chunk) -> choice result
        self.forwards = []   # (phase, training, inputs (numpy), logits (numpy), autocast_on)
        self.train_loss = []
        self.steps = 0
        self.lr, self.betas = [], []
        self.w = {}          # step -> {name: tensor}
        self.val = []        # (loss, metric)
        self.es_counter = []
        self.best = []       # (epoch, loss, clone)
        self.prep = None


def logging_rng_class(rec):
    class LoggingRandomState(np.random.RandomState):
        """RandomState that logs each outer permutation/shuffle/choice (calls nested inside another one, as
        choice -> permutation -> shuffle, are not logged separately)."""

        def permutation(self, x):
            rec.depth += 1
            try:
                r = super().permutation(x)
            finally:
                rec.depth -= 1
            if rec.depth == 0:
                rec.log.append(dict(phase=rec.phase, kind="permutation", n=int(len(r)), out=np.array(r)))
            return r

        def shuffle(self, x):
            rec.depth += 1
            try:
                super().shuffle(x)
            finally:
                rec.depth -= 1
            if rec.depth == 0:
                rec.log.append(dict(phase=rec.phase, kind="shuffle", n=int(len(x)), out=np.array(x)))

        def choice(self, a, size=None, replace=True, p=None):
            rec.depth += 1
            try:
                r = super().choice(a, size=size, replace=replace, p=p)
            finally:
                rec.depth -= 1
            if rec.depth == 0:
                rec.log.append(dict(phase=rec.phase, kind="choice", n=int(np.size(r)), out=np.array(r),
                                    args=[int(a) if np.isscalar(a) else "array", size, bool(replace)]))
            return r

    return LoggingRandomState


@contextlib.contextmanager
def patched(rec, torch):
    """Installs every wrapper for one fit/predict; restores upstream afterwards."""
    from autogluon.tabular.models.mitra import sklearn_interface as si
    from autogluon.tabular.models.mitra._internal.core import callbacks as cb
    from autogluon.tabular.models.mitra._internal.core import trainer_finetune as tf
    from autogluon.tabular.models.mitra._internal.data import dataset_finetune as dfm
    from autogluon.tabular.models.mitra._internal.data import preprocessor as pp

    undo = []

    def put(obj, name, new):
        undo.append((obj, name, getattr(obj, name)))
        setattr(obj, name, new)

    LRS = logging_rng_class(rec)
    o_cfg = si.MitraBase._create_config

    def create_config(self, *a, **k):
        cfg, model_cls = o_cfg(self, *a, **k)
        cfg.hyperparams["precision"] = "float32"
        rec.cfg = cfg
        return cfg, model_cls

    put(si.MitraBase, "_create_config", create_config)

    o_init = tf.TrainerFinetune.__init__

    def trainer_init(self, cfg, model, *a, **k):
        rng = k.get("rng")
        assert rng is not None and type(rng) is np.random.RandomState, "upstream no longer passes rng= (check)"
        lr = LRS(0)
        lr.set_state(rng.get_state())
        k["rng"] = lr
        o_init(self, cfg, model, *a, **k)
        rec.trainer = self
        names = {id(p): n for n, p in self.model.named_parameters()}
        params = self.optimizer.param_groups[0]["params"]
        assert len(self.optimizer.param_groups) == 1
        rec.names = [names[id(p)] for p in params]
        rec.state_keys = list(self.model.state_dict().keys())
        o_step = self.optimizer.step
        opt = self.optimizer

        def step(*sa, **sk):
            rec.steps += 1
            s = rec.steps
            g = opt.param_groups[0]
            rec.lr.append(float(g["lr"]))
            rec.betas.append([float(b) for b in g["betas"]])
            rec.hyper = {k2: (float(v) if isinstance(v, float) else v) for k2, v in g.items()
                         if k2 not in ("params",) and isinstance(v, (int, float, bool, type(None), tuple))}
            if s == 1:
                rec.w[0] = {n: p.detach().clone() for n, p in zip(rec.names, params)}
                missing = [n for n, p in zip(rec.names, params) if p.grad is None]
                assert not missing, f"parameters without grad at step 1: {missing}"
                rec.grad = {n: p.grad.detach().clone() for n, p in zip(rec.names, params)}
            r = o_step(*sa, **sk)
            if s == 1:
                rec.adam_m = {n: opt.state[p]["exp_avg"].detach().clone() for n, p in zip(rec.names, params)}
                rec.adam_v = {n: opt.state[p]["exp_avg_sq"].detach().clone() for n, p in zip(rec.names, params)}
            rec.w[s] = {n: p.detach().clone() for n, p in zip(rec.names, params)}
            return r

        if hasattr(o_step, "_wrapped_by_lr_sched"):  # torch's LR-scheduler marker (else it warns)
            step._wrapped_by_lr_sched = o_step._wrapped_by_lr_sched
        opt.step = step

        def pre(mod, args):
            rec.fwd_in = [a.detach().clone() for a in args]

        def post(mod, args, out):
            on = torch.is_autocast_enabled("cpu")
            rec.forwards.append((rec.phase, mod.training, [t.numpy().copy() for t in rec.fwd_in],
                                 out.detach().numpy().copy(), on, str(out.dtype)))

        self.model.register_forward_pre_hook(pre)
        self.model.register_forward_hook(post)
        self.loss.register_forward_hook(lambda m, i, o: rec.train_loss.append(o.detach().clone()))

    put(tf.TrainerFinetune, "__init__", trainer_init)

    o_eval = tf.TrainerFinetune.evaluate

    def evaluate(self, *a, **k):
        e = rec.n_eval
        rec.n_eval += 1
        old, rec.phase = rec.phase, f"eval.{e}"
        try:
            m = o_eval(self, *a, **k)
        finally:
            rec.phase = old
        rec.val.append((float(m.loss), float(m.metrics[self.metric])))
        return m

    put(tf.TrainerFinetune, "evaluate", evaluate)

    o_pred = tf.TrainerFinetune.predict

    def predict(self, *a, **k):
        old, rec.phase = rec.phase, "predict"
        try:
            return o_pred(self, *a, **k)
        finally:
            rec.phase = old

    put(tf.TrainerFinetune, "predict", predict)

    o_split = dfm.make_dataset_split

    def make_split(x, y, task, seed):
        rec.n_split += 1
        e = rec.n_split
        rec.phase = f"split.{e}"
        n_log = len(rec.log)
        ids = np.arange(x.shape[0], dtype=np.int64)
        i_s, i_q, y_s, y_q = o_split(x=ids, y=y, task=task, seed=seed)
        kinds = [c["kind"] for c in rec.log[n_log:]]
        path = "stratified" if "shuffle" in kinds else "shuffle_split"
        assert np.array_equal(y_s, y[i_s]) and np.array_equal(y_q, y[i_q])
        rec.splits[e] = (np.asarray(i_s, dtype=np.int64), np.asarray(i_q, dtype=np.int64), path)
        rec.phase = f"train.{e}"
        return x[i_s], x[i_q], y_s, y_q

    put(dfm, "make_dataset_split", make_split)

    o_get = dfm.DatasetFinetune.__getitem__

    def getitem(self, idx):
        n_log = len(rec.log)
        r = o_get(self, idx)
        ch = [c for c in rec.log[n_log:] if c["kind"] == "choice"]
        assert len(ch) == 1
        rec.perms[(rec.phase, int(idx))] = ch[0]["out"].astype(np.int64)
        return r

    put(dfm.DatasetFinetune, "__getitem__", getitem)

    o_ck = cb.Checkpoint.__call__

    def checkpoint(self, net, loss):
        before = self.curr_best_loss
        o_ck(self, net, loss)
        epoch = rec.n_eval - 1
        if self.curr_best_loss != before:
            rec.best.append((epoch, float(loss), {k2: v.detach().clone() for k2, v in net.state_dict().items()}))
        rec.ck = self

    put(cb.Checkpoint, "__call__", checkpoint)

    o_es = cb.EarlyStopping.__call__

    def early(self, v):
        o_es(self, v)
        rec.es_counter.append(int(self.counter))
        rec.es_stop = bool(self.early_stop)

    put(cb.EarlyStopping, "__call__", early)

    o_pfit = pp.Preprocessor.fit

    def pfit(self, X, y):
        r = o_pfit(self, X, y)
        rec.prep = self
        return r

    put(pp.Preprocessor, "fit", pfit)
    try:
        yield
    finally:
        for obj, name, v in reversed(undo):
            setattr(obj, name, v)


# --------------------------------------------------------------------------
# one case
# --------------------------------------------------------------------------

def global_seed_for(task, n_kept):
    """Smallest k whose np.random.seed(k) gives the Preprocessor mixed feature signs (and, for regression, a
    mirrored target): the draws are replayed here with the same calls, in upstream's order (spec §1.3)."""
    for k in range(1000):
        np.random.seed(k)
        rm = np.random.choice([True, False], size=(1,)).item() if task == "regression" else None
        m = np.random.choice([1, -1], size=(1, n_kept))
        if (m == 1).any() and (m == -1).any() and rm in (None, True):
            return k
    raise RuntimeError("no global seed found")


def grads_f64(torch, model_dir, task, fwd_in, y_query):
    """The float64 twin of the step-1 forward/backward (spec §4.2 item 4): same weights and batch, model.double(),
    x_quantile's outputs and (regressor) the y-embedding input cast to float64."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from autogluon.tabular.models.mitra._internal.models.tab2d import Tab2D

    m = Tab2D.from_pretrained(str(model_dir), device="cpu").double()
    m.x_quantile.register_forward_hook(lambda mod, i, o: tuple(t.double() for t in o))
    if task == "regression":
        m.y_embedding.y_embedding.register_forward_pre_hook(lambda mod, i: tuple(t.double() for t in i))
    m.train()
    with sdpa_kernel([SDPBackend.MATH]), torch.autocast("cpu", enabled=False):
        out = m(*[t.clone() for t in fwd_in])
        yq = y_query.clone()
        if task == "classification":
            loss = torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), yq.reshape(-1))
        else:
            loss = torch.nn.functional.mse_loss(out, yq.double())
        loss.backward()
    return out.detach(), loss.detach(), {n: p.grad.detach().clone() for n, p in m.named_parameters()}


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    nb = np.linalg.norm(b)
    return float(np.linalg.norm(a - b) / nb) if nb > 0 else float(np.linalg.norm(a - b))


def run_case(name, c, model_dir, wsha, out_dir: Path):
    torch = torch_fp32()
    warnings.filterwarnings("ignore", message="In CPU autocast, but the target dtype is not supported")
    warnings.filterwarnings("ignore", message=".*pin_memory.*")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from autogluon.tabular.models.mitra.sklearn_interface import MitraClassifier, MitraRegressor

    cls = c["task"] == "classification"
    S = c["steps"]
    d = make_data(c)
    raw = {k: v.copy() for k, v in d.items()}
    n_kept_guess = sum(len(np.unique(col[~np.isnan(col)])) > 1 for col in d["x_train"].T)
    gseed = global_seed_for(c["task"], n_kept_guess)

    rec = Recorder()
    Est = MitraClassifier if cls else MitraRegressor
    est = Est(device="cpu", hf_model=str(model_dir), fine_tune_steps=S, seed=SEED, verbose=False,
              **c.get("hyper", {}))
    torch.manual_seed(0)
    with patched(rec, torch), sdpa_kernel([SDPBackend.MATH]):
        np.random.seed(gseed)
        est.fit(d["x_train"].copy(), d["y_train"].copy(), d["x_val"].copy(), d["y_val"].copy(), time_limit=None)
        final = {k: v.detach().clone() for k, v in rec.trainer.model.state_dict().items()}
        aliases = all(rec.ck.best_model[k].data_ptr() == v.data_ptr()
                      for k, v in rec.trainer.model.state_dict().items())
        pred_state = rec.trainer.rng.get_state()
        n_log_pred = len(rec.log)
        pred = est.predict_proba(raw["x_test"].copy()) if cls else est.predict(raw["x_test"].copy())
        pred_log = rec.log[n_log_pred:]
    main_log = list(rec.log)
    assert rec.steps == S and len(rec.val) == S + 1, (rec.steps, len(rec.val))
    assert set(rec.names) == set(rec.state_keys), "parameters != state_dict keys"
    t = rec.trainer
    P = rec.prep

    # --- preprocessed arrays (deterministic given the fitted Preprocessor) and consistency with the forwards
    pre = {"pre.x_train": P.transform_X(raw["x_train"].copy()), "pre.y_train": P.transform_y(raw["y_train"].copy()),
           "pre.x_val": P.transform_X(raw["x_val"].copy()), "pre.y_val": raw["y_val"].copy(),
           "pre.x_test": P.transform_X(raw["x_test"].copy())}
    for k in pre:
        assert pre[k].dtype in (np.float32, np.int64), (k, pre[k].dtype)
    mirror = np.asarray(P.mirror, dtype=np.float32).reshape(-1)
    kept = int(mirror.size)
    assert kept == n_kept_guess and pre["pre.x_train"].shape[1] == kept

    exp = {}
    batches = {}
    train_fw = [f for f in rec.forwards if f[1]]
    eval_fw = [f for f in rec.forwards if not f[1] and f[0].startswith("eval.")]
    pred_fw = [f for f in rec.forwards if f[0] == "predict"]
    assert len(train_fw) == S
    for e in range(1, S + 1):
        i_s, i_q, path = rec.splits[e]
        perm = rec.perms[(f"train.{e}", 0)]
        ns, nq = min(8192, len(i_s)), min(1024, len(i_q))
        sup = i_s[:ns][perm]
        qry = i_q[:nq]
        batches[e] = (sup, qry, path)
        exp[f"batch.{e}.support_idx"] = sup
        exp[f"batch.{e}.query_idx"] = qry
        exp[f"batch.{e}.support_perm"] = perm
        fin = train_fw[e - 1][2]
        assert np.array_equal(fin[0][0], pre["pre.x_train"][sup]), f"step {e}: x_support"
        assert np.array_equal(fin[1][0], pre["pre.y_train"][sup]), f"step {e}: y_support"
        assert np.array_equal(fin[2][0], pre["pre.x_train"][qry]), f"step {e}: x_query"
        assert not train_fw[e - 1][4] and train_fw[e - 1][5] == "torch.float32", "autocast on / not fp32"
        sl = [cc for cc in rec.log if cc["phase"] == f"split.{e}"]
        exp[f"split.{e}.permutation"] = sl[0]["out"].astype(np.int64)
        assert sl[0]["kind"] == "permutation"
        for j, cc in enumerate(sl[1:]):
            assert cc["kind"] == "shuffle"
            exp[f"split.{e}.shuffle.{j}"] = cc["out"].astype(np.int64)
    n_chunks = -(-len(raw["x_val"]) // 1024)
    assert len(eval_fw) == (S + 1) * n_chunks
    for e in range(S + 1):
        for ch in range(n_chunks):
            p = rec.perms[(f"eval.{e}", ch)]
            exp[f"eval.{e}.{ch}.support_perm"] = p
            fin = eval_fw[e * n_chunks + ch][2]
            assert np.array_equal(fin[0][0], pre["pre.x_train"][p]) and np.array_equal(fin[1][0], pre["pre.y_train"][p])
            assert np.array_equal(fin[2][0], pre["pre.x_val"][ch * 1024:(ch + 1) * 1024])
    for ch, f in enumerate(pred_fw):
        p = rec.perms[("predict", ch)]
        exp[f"predict.{ch}.support_perm"] = p
        assert np.array_equal(f[2][0][0], pre["pre.x_train"][p])
        assert np.array_equal(f[2][2][0], pre["pre.x_test"][ch * 1024:(ch + 1) * 1024])

    # --- numbers
    exp["lr"] = np.array(rec.lr, dtype=np.float64)
    exp["val_loss"] = np.array([v[0] for v in rec.val], dtype=np.float64)
    exp["train_loss"] = np.array([float(x) for x in rec.train_loss], dtype=np.float64)
    logits0 = train_fw[0][3][0]
    loss0 = rec.train_loss[0].numpy().astype(np.float32).reshape(1)
    exp["logits0"] = logits0.astype(np.float32)
    exp["loss0"] = loss0
    wS = rec.w[S]
    for n in rec.names:
        exp[f"wS.{n}"] = wS[n].numpy()
    if c["full"]:
        for n in rec.names:
            exp[f"grad.{n}"] = rec.grad[n].numpy()
            exp[f"adam_m.{n}"] = rec.adam_m[n].numpy()
            exp[f"adam_v.{n}"] = rec.adam_v[n].numpy()
            exp[f"w1.{n}"] = rec.w[1][n].numpy()
    if cls:
        exp["pred_proba"] = np.asarray(pred, dtype=np.float32)
    else:
        exp["pred"] = np.asarray(pred, dtype=np.float64)

    # intended best (strictly lowest val loss, earliest on ties, epoch 0 included)
    best_epoch, best_loss, best_state = rec.best[-1]
    vl = [v[0] for v in rec.val]
    assert best_epoch == int(np.argmin(vl)), (best_epoch, vl)
    for n in rec.names:
        ref = rec.w[best_epoch][n] if best_epoch > 0 else rec.w[0][n]
        assert torch.equal(best_state[n], ref), f"best clone != weights after step {best_epoch}: {n}"
    last_is_best = best_epoch == S
    final_is_last = all(torch.equal(final[n], wS[n]) for n in rec.names)
    best_stored = 0 < best_epoch < S
    if best_stored:
        for n in rec.names:
            exp[f"best.{n}"] = best_state[n].numpy()
    pred_best = None
    if best_epoch != S:
        # the intended semantics (restore best): predict again from the same rng state with the best weights
        t.model.load_state_dict(best_state)
        t.rng.set_state(pred_state)
        with sdpa_kernel([SDPBackend.MATH]):
            pb = est.predict_proba(raw["x_test"].copy()) if cls else est.predict(raw["x_test"].copy())
        pred_best = np.asarray(pb, dtype=np.float32 if cls else np.float64)
        exp["pred_proba_best" if cls else "pred_best"] = pred_best
        t.model.load_state_dict(final)

    # --- step 1 re-derived with torch's own AdamW on w0 (bit-exact) and the float64 twin
    step1 = adamw_check(torch, rec.w[0], rec.grad, rec, rec.names) if c["full"] else None
    e_pt = norm64 = noise = None
    if c["full"]:
        fin = [torch.from_numpy(a) for a in train_fw[0][2]]
        sup, qry, _ = batches[1]
        yq = torch.from_numpy(pre["pre.y_train"][qry])[None]
        # the fp32 replay of step 1 must reproduce upstream's recorded logits/loss/grads bit for bit
        o32, l32, g32 = replay_f32(torch, model_dir, c["task"], fin, yq)
        replay_exact = (np.array_equal(o32.numpy()[0], logits0) and float(l32) == float(loss0[0])
                        and all(torch.equal(g32[n], rec.grad[n]) for n in rec.names))
        o64, l64, g64 = grads_f64(torch, model_dir, c["task"], fin, yq)
        e_pt = {"logits0": rel(logits0, o64.numpy()[0]), "loss0": rel(loss0, l64.numpy().reshape(1))}
        norm64 = {"logits0": float(np.linalg.norm(o64.numpy())), "loss0": abs(float(l64))}
        for n in rec.names:
            e_pt[f"grad.{n}"] = rel(rec.grad[n].numpy(), g64[n].numpy())
            norm64[f"grad.{n}"] = float(np.linalg.norm(g64[n].numpy()))
        gmax = max(v for k, v in norm64.items() if k.startswith("grad."))
        # analytically zero gradients (k.bias: softmax is invariant to a per-query constant): both fp32 and
        # fp64 hold rounding noise only, so e_pt is meaningless there; compare them in absolute terms
        noise = sorted(k for k, v in norm64.items() if k.startswith("grad.") and v < 1e-6 * gmax)

    # --- write
    out_dir.mkdir(parents=True, exist_ok=True)
    inputs = {"x_train": raw["x_train"], "y_train": raw["y_train"], "x_val": raw["x_val"], "y_val": raw["y_val"],
              "x_test": raw["x_test"], "mirror": mirror,
              "pre_nan_mean": np.asarray(P.pre_nan_mean, dtype=np.float32), **pre}
    st_write(out_dir / "inputs.safetensors", inputs)
    st_write(out_dir / "expected.safetensors", exp)

    rng_calls = [[cc["phase"], cc["kind"], cc["n"]] for cc in main_log]
    case = {
        "case": name, "task": c["task"], "steps": S, "seed": SEED, "global_numpy_seed": gseed,
        "data_seed": c["data_seed"], "n_train": len(raw["x_train"]), "n_features": F, "n_kept": kept,
        "n_val": len(raw["x_val"]), "n_test": len(raw["x_test"]),
        "weights": {"command": ["nofall", "gen-weights", "mitra", "--out", "DIR", *c["weights"]],
                    "args": c["weights"], "sha256_model_safetensors": wsha, "n_params": int(sum(
                        rec.w[0][n].numel() for n in rec.names)), "n_tensors": len(rec.names)},
        "param_order": rec.names,
        "preprocessor": {"singular_features": [bool(v) for v in P.singular_features],
                         "pre_nan_mean": [float(v) for v in P.pre_nan_mean],
                         "mirror": [int(v) for v in np.asarray(P.mirror).reshape(-1)],
                         "regression_mirror": (bool(P.regression_mirror) if not cls else None),
                         "y_min": (float(P.y_min) if not cls else None),
                         "y_max": (float(P.y_max) if not cls else None)},
        "K": int(len(np.unique(raw["y_train"]))) if cls else None,
        "classes": [int(v) for v in np.unique(raw["y_train"])] if cls else None,
        "class_counts_train": [int(v) for v in np.bincount(raw["y_train"])] if cls else None,
        "episode_path": [batches[e][2] for e in range(1, S + 1)],
        "n_support": [int(len(batches[e][0])) for e in range(1, S + 1)],
        "n_query": [int(len(batches[e][1])) for e in range(1, S + 1)],
        "eval_chunks": n_chunks,
        "optimizer": {"class": type(t.optimizer).__name__, **{k: v for k, v in rec.hyper.items()
                                                                if k not in ("lr", "initial_lr")},
                      "betas_per_step": rec.betas},
        "lr": rec.lr,
        "val_loss": [v[0] for v in rec.val],
        "val_metric": {"name": str(t.metric), "values": [v[1] for v in rec.val]},
        "train_loss": [float(x) for x in rec.train_loss],
        "early_stopping_counter": rec.es_counter,
        "early_stop_epoch": (len(rec.es_counter) if rec.es_stop else None),
        "best_epoch": best_epoch,
        "best_val_loss": best_loss,
        "best_weights": ("pretrained (epoch 0: recreate with gen-weights)" if best_epoch == 0 else
                         "last (= wS)" if last_is_best else "stored as best.*"),
        "upstream_final_equals_last_step": final_is_last,
        "upstream_checkpoint_aliases_live_weights": aliases,
        "pred_uses": "upstream final weights (= last step on CPU)" if final_is_last else "upstream final weights",
        "pred_best_stored": pred_best is not None,
        "rng_calls": rng_calls,
        "predict_rng_calls": len(pred_log),
        "step1_adamw_check": step1,
        "step1_replay_f32_bitexact": (replay_exact if c["full"] else None),
        "e_pt": e_pt,
        "norm64": (norm64 if c["full"] else None),
        "grads_rounding_noise_only": (noise if c["full"] else None),
        "autocast_enabled_in_any_forward": any(f[4] for f in rec.forwards),
        "forward_dtype": sorted({f[5] for f in rec.forwards}),
        "patches": [
            "MitraBase._create_config: hyperparams['precision'] = 'float32' (CPU autocast(float32) disables itself)",
            "sdpa_kernel([SDPBackend.MATH]) around fit and predict; float32_matmul_precision('highest'); TF32 off",
            f"np.random.seed({gseed}) right before fit (the Preprocessor's mirror draws)",
            "the shared rng: a logging RandomState subclass with the same state",
            "dataset_finetune.make_dataset_split called with x = arange(N) (row ids), rows gathered by id",
            "optimizer.step, Tab2D forward hooks, loss forward hook, evaluate, EarlyStopping.__call__, "
            "Checkpoint.__call__ (real clones), Preprocessor.fit wrapped to record",
        ],
        "hyperparams": {k: rec.cfg.hyperparams[k] for k in (
            "lr", "weight_decay", "warmup_steps", "max_epochs", "max_samples_support", "max_samples_query",
            "early_stopping_patience", "precision", "metric", "regression_loss", "label_smoothing")},
        "versions": versions(),
    }
    (out_dir / "case.json").write_text(json.dumps(case, indent=1) + "\n")
    return case


def replay_f32(torch, model_dir, task, fwd_in, y_query):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from autogluon.tabular.models.mitra._internal.models.tab2d import Tab2D

    m = Tab2D.from_pretrained(str(model_dir), device="cpu")
    m.train()
    with sdpa_kernel([SDPBackend.MATH]), torch.autocast("cpu", enabled=False):
        out = m(*[t.clone() for t in fwd_in])
        if task == "classification":
            loss = torch.nn.CrossEntropyLoss()(out.reshape(-1, out.shape[-1]), y_query.reshape(-1))
        else:
            loss = torch.nn.MSELoss()(out, y_query)
        loss.backward()
    return out.detach(), loss.detach(), {n: p.grad.detach().clone() for n, p in m.named_parameters()}


def adamw_check(torch, w0, grad, rec, names):
    """torch's own AdamW (the trainer's settings: betas (0.9, 0.999), eps 1e-8, weight_decay 0.1, lr = the
    recorded step-1 lr) applied to (w0, grad): must give the recorded m, v and w1 bit for bit."""
    ps = [torch.nn.Parameter(w0[n].clone()) for n in names]
    for p, n in zip(ps, names):
        p.grad = grad[n].clone()
    opt = torch.optim.AdamW(ps, lr=rec.lr[0], betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
    opt.step()
    ok = {"m": all(torch.equal(opt.state[p]["exp_avg"], rec.adam_m[n]) for p, n in zip(ps, names)),
          "v": all(torch.equal(opt.state[p]["exp_avg_sq"], rec.adam_v[n]) for p, n in zip(ps, names)),
          "w1": all(torch.equal(p.detach(), rec.w[1][n]) for p, n in zip(ps, names))}
    assert all(ok.values()), ok
    # elements whose step-1 update rounds to nothing (|lr| below half an ulp of the weight)
    zero = sum(int((rec.w[1][n] == w0[n]).sum()) for n in names)
    total = sum(w0[n].numel() for n in names)
    ok["w1_equal_w0_elements"] = zero
    ok["elements"] = total
    return ok


# --------------------------------------------------------------------------
# modes
# --------------------------------------------------------------------------

def make(args):
    nofall = Path(args.nofall).resolve()
    out = Path(args.out)
    only = set(args.only.split(",")) if args.only else None
    tmp = Path(tempfile.mkdtemp(prefix="nofall-ft-"))
    try:
        for name, c in CASES.items():
            if only and name not in only:
                continue
            md = tmp / name
            wsha = gen_weights(nofall, md, c["weights"])
            d = out / name
            if d.exists():
                shutil.rmtree(d)
            case = run_case(name, c, md, wsha, d)
            size = sum(p.stat().st_size for p in d.iterdir())
            print(f"{name}: best epoch {case['best_epoch']}, final = last {case['upstream_final_equals_last_step']}, "
                  f"paths {sorted(set(case['episode_path']))}, val_loss {case['val_loss']}, {size} bytes",
                  flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["make", "selftest"])
    ap.add_argument("--nofall", default=str(DEFAULT_NOFALL))
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    if a.mode == "make":
        make(a)
        return 0
    return selftest(a)


if __name__ == "__main__":
    sys.exit(main())
