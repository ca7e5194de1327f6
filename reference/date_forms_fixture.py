"""date_forms_fixture.py -- pandas' verdict on value forms for nofall's date decision
(src/tabular/ag-types.c nf__date_maybe; docs/tables.md). Writes
tests/fixtures/tables/dates.tsv: one row per string, "value<TAB>1" when
pd.to_datetime(errors="coerce", format="mixed") -- what AutoGluon's
datetime_as_object check calls -- reads a date, "value<TAB>0" when it gives NaT.
Run with the reference venv: /work/.venv-ref/bin/python reference/date_forms_fixture.py"""
import sys
import warnings

import pandas as pd

FORMS = [
    # category labels and ids (NaT): a word dateutil does not know
    "room 1", "room 2", "room 3", "Ward 3", "Apt 4B", "lvl 1", "cat-1", "id-7", "v2.0", "v 2", "x1", "abc 12",
    "Item #4", "no. 5", "Q1 2020", "Q1-2020", "2021 room", "room 2021", "2021-03-04 room", "12:00 abc", "12:00 x",
    "Tues 4 May 2021", "noon", "monday", "june", "sept 5",
    # an upper-case word or AM/PM before any digit (no hour yet: dateutil raises)
    "A-00017", "B2", "A1", "P-12", "ZZ-1", "ABC-1", "AB 12", "X 1", "T5", "a 1", "p 1", "PST 5", "Z 5", "EST", "JAN",
    # dates pandas reads
    "2021-03-04", "03/04/2021", "4 May 2021", "March 4 2021", "4 March 2021 at 5pm", "Jan 2021", "2021 Jan",
    "Sept 2021", "2021/05/04", "5th of May 2021", "May 5th 2021", "2021 AD", "1999", "10:30", "12:00 EST",
    "12:00 XYZ", "1.2.3", "2020Q1", "2020q1", "1q2020", "2020-q1", "4q2005", "2021-05-04T10:00",
    # no year (one number of 1-2 digits, <= 31, ASCII, not H:MM first): dateutil's default year 1 is out
    # of pandas' range -> NaT
    "Jan 5", "5 pm", "05", "sept 5th", "Mon 5", "Z5", "at 31", "on the 5th", "5 Jan", "Jan 05",
    # ... but a year from another number, a number above 31, or a time first: dates
    "Jan 5 2021", "Jan 5 21", "Jan 45", "5 Jan 1999", "10:30 pm",
]


def main(out):
    warnings.simplefilter("ignore")
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        f.write(f"# pandas {pd.__version__}: value, 1 = pd.to_datetime(format='mixed') reads a date, 0 = NaT\n")
        for s in FORMS:
            r = pd.to_datetime(pd.Series([s]), errors="coerce", format="mixed")
            f.write(f"{s}\t{0 if pd.isna(r[0]) else 1}\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/tables/dates.tsv")
