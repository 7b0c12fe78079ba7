"""What the tests share: data and model factories, the Hub stand-in, a fake vipune binary,
reference implementations and the helpers of the reliability tests. ``ROOT`` is the
repository's root folder."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
