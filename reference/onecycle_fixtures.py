"""OneCycleLR's learning rate and AdamW beta1 from real torch, for nofall's
nf_onecycle (src/core/train-sched.c; test: tests/test-train-c.c).

Writes tests/fixtures/onecycle.json: for each setting, the lr and beta1 that
torch.optim.lr_scheduler.OneCycleLR leaves in the AdamW param group after s
scheduler steps, s = 0 .. total_steps, as Python reprs (exact doubles).
TabSTAR's setting (finetune.md section 3.3): max_lr 1e-3, total_steps 50,
pct_start 0.1, cos, defaults otherwise; plus two others (linear anneal,
other factors and momenta, and no momentum cycling).

  /work/.venv-ref/bin/python reference/onecycle_fixtures.py [OUT]
"""
import json
import sys
import warnings

import torch

SETTINGS = [
    dict(name="tabstar", max_lr=1e-3, total_steps=50, pct_start=0.1, anneal_strategy="cos",
         div_factor=25.0, final_div_factor=1e4, cycle_momentum=True, base_momentum=0.85, max_momentum=0.95),
    dict(name="other", max_lr=3e-3, total_steps=37, pct_start=0.3, anneal_strategy="linear",
         div_factor=10.0, final_div_factor=100.0, cycle_momentum=True, base_momentum=0.8, max_momentum=0.9),
    dict(name="no-momentum", max_lr=0.02, total_steps=7, pct_start=0.5, anneal_strategy="cos",
         div_factor=4.0, final_div_factor=1e3, cycle_momentum=False, base_momentum=0.85, max_momentum=0.95),
]


def run(st):
    p = torch.nn.Parameter(torch.zeros(2))
    opt = torch.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.999))
    kw = {k: v for k, v in st.items() if k != "name"}
    sch = torch.optim.lr_scheduler.OneCycleLR(opt, **kw)
    lr, b1 = [], []
    for s in range(st["total_steps"] + 1):
        if s > 0:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # stepping the scheduler without optimizer.step()
                sch.step()
        g = opt.param_groups[0]
        lr.append(repr(float(g["lr"])))
        b1.append(repr(float(g["betas"][0])))
    return dict(st, lr=lr, beta1=b1)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/onecycle.json"
    doc = {"torch": torch.__version__, "settings": [run(s) for s in SETTINGS]}
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
