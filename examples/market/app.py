"""A-share market data (seed 001): turnover totals in 亿元 and daily K-lines. All figures made up."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import math
from pathlib import Path
from typing import Any

from starlette.responses import Response

# Relative on purpose: the package may ship inside the wheel under another name.
from .._upstream import Api, ApiError, AuthRequirement, Call, json_response  # noqa: TID252

SPEC_PATH = Path(__file__).with_name("openapi.yaml")

BEIJING = dt.timezone(dt.timedelta(hours=8), "Asia/Shanghai")
MAX_RANGE_DAYS = 366

# First trading day of each exchange.
OPENED = {"SH": dt.date(1990, 12, 19), "SZ": dt.date(1991, 7, 3), "BJ": dt.date(2021, 11, 15)}

# Made-up but plausible exchange holidays (weekdays only matter).
HOLIDAYS: frozenset[dt.date] = frozenset(
    dt.date(y, m, d)
    for y, m, d in [
        (2024, 1, 1),
        (2024, 2, 9),
        (2024, 2, 12),
        (2024, 2, 13),
        (2024, 2, 14),
        (2024, 2, 15),
        (2024, 2, 16),
        (2024, 4, 4),
        (2024, 4, 5),
        (2024, 5, 1),
        (2024, 5, 2),
        (2024, 5, 3),
        (2024, 6, 10),
        (2024, 9, 16),
        (2024, 9, 17),
        (2024, 10, 1),
        (2024, 10, 2),
        (2024, 10, 3),
        (2024, 10, 4),
        (2024, 10, 7),
        (2025, 1, 1),
        (2025, 1, 28),
        (2025, 1, 29),
        (2025, 1, 30),
        (2025, 1, 31),
        (2025, 2, 3),
        (2025, 2, 4),
        (2025, 4, 4),
        (2025, 5, 1),
        (2025, 5, 2),
        (2025, 5, 5),
        (2025, 6, 2),
        (2025, 10, 1),
        (2025, 10, 2),
        (2025, 10, 3),
        (2025, 10, 6),
        (2025, 10, 7),
        (2025, 10, 8),
        (2026, 1, 1),
        (2026, 1, 2),
        (2026, 2, 16),
        (2026, 2, 17),
        (2026, 2, 18),
        (2026, 2, 19),
        (2026, 2, 20),
        (2026, 4, 6),
        (2026, 5, 1),
        (2026, 5, 4),
        (2026, 5, 5),
        (2026, 6, 19),
        (2026, 9, 25),
        (2026, 10, 1),
        (2026, 10, 2),
        (2026, 10, 5),
        (2026, 10, 6),
        (2026, 10, 7),
    ]
)

# ts_code -> (name, market, listing date, base price in CNY)
STOCKS: dict[str, tuple[str, str, dt.date, float]] = {
    "000001.SZ": ("平安银行", "SZ", dt.date(1991, 4, 3), 11.2),
    "300750.SZ": ("宁德时代", "SZ", dt.date(2018, 6, 11), 230.0),
    "430047.BJ": ("诺思兰德", "BJ", dt.date(2021, 11, 15), 15.6),
    "600519.SH": ("贵州茅台", "SH", dt.date(2001, 8, 27), 1520.0),
    "601318.SH": ("中国平安", "SH", dt.date(2007, 3, 1), 48.3),
}

_WEEKDAYS = "一二三四五六日"


def today() -> dt.date:
    return dt.datetime.now(BEIJING).date()


def _unit(*parts: object) -> float:
    """A deterministic number in [0, 1) from the parts."""
    digest = hashlib.sha256("|".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _parse(text: str, field: str) -> dt.date:
    try:
        return dt.datetime.strptime(text, "%Y%m%d").date()
    except ValueError:
        raise ApiError(422, "INVALID_DATE", f"{text} is not a calendar date (YYYYMMDD)", field=field) from None


def is_trading_day(day: dt.date) -> bool:
    return day.weekday() < 5 and day not in HOLIDAYS


def _why_closed(day: dt.date) -> str:
    if day.weekday() >= 5:
        return f"星期{_WEEKDAYS[day.weekday()]}，周末休市"
    return "交易所节假日休市"


def turnover_yi_yuan(day: dt.date, market: str) -> float:
    base, spread = {"SH": (3500.0, 3200.0), "SZ": (4600.0, 4400.0), "BJ": (12.0, 70.0)}[market]
    return round(base + spread * _unit("turnover", market, day.isoformat()), 2)


def _close(ts_code: str, day: dt.date) -> float:
    base = STOCKS[ts_code][3]
    n = day.toordinal()
    wave = 0.12 * math.sin(n / 23.0) + 0.05 * math.sin(n / 7.3)
    noise = 0.03 * (_unit("close", ts_code, n) - 0.5)
    return round(base * (1 + wave + noise), 2)


def _previous_trading_day(day: dt.date) -> dt.date:
    day -= dt.timedelta(days=1)
    while not is_trading_day(day):
        day -= dt.timedelta(days=1)
    return day


def candle(ts_code: str, day: dt.date) -> dict[str, Any]:
    close = _close(ts_code, day)
    prev_close = _close(ts_code, _previous_trading_day(day))
    open_ = round(prev_close * (1 + 0.02 * (_unit("open", ts_code, day) - 0.5)), 2)
    high = round(max(open_, close) * (1 + 0.015 * _unit("high", ts_code, day)), 2)
    low = round(min(open_, close) * (1 - 0.015 * _unit("low", ts_code, day)), 2)
    vol_lots = int(20_000 + 480_000 * _unit("vol", ts_code, day))
    amount_qian_yuan = round(vol_lots * 100 * (open_ + close) / 2 / 1000, 1)
    return {
        "trade_date": day.strftime("%Y%m%d"),
        "open": open_,
        "high": high,
        "low": low,
        "close": close,
        "pct_chg": round((close - prev_close) / prev_close * 100, 2),
        "vol_lots": vol_lots,
        "amount_qian_yuan": amount_qian_yuan,
    }


@dataclasses.dataclass
class MarketState:
    lookups: int = 0

    def summary(self) -> dict[str, Any]:
        return {"stocks": len(STOCKS), "lookups": self.lookups}


api: Api[MarketState] = Api("market", SPEC_PATH, MarketState)


def create_app(*, auth: AuthRequirement | str | None = None, validate_responses: bool = True) -> Any:
    return api.create_app(auth=auth, validate_responses=validate_responses)


@api.operation("getMarketTotal")
async def get_market_total(call: Call[MarketState]) -> Response:
    text: str = call.query["trade_date"]
    market: str = call.query["market"]
    day = _parse(text, "trade_date")
    call.state.lookups += 1
    if day > today():
        raise ApiError(422, "FUTURE_DATE", f"{text} is in the future; no data yet", field="trade_date")
    if day < OPENED[market]:
        raise ApiError(
            404, "NO_DATA", f"{market} opened on {OPENED[market]:%Y%m%d}; no data for {text}", field="trade_date"
        )
    if not is_trading_day(day):
        raise ApiError(404, "NON_TRADING_DAY", f"{text} 不是交易日（{_why_closed(day)}）", field="trade_date")
    return json_response({"trade_date": text, "market": market, "turnover_yi_yuan": turnover_yi_yuan(day, market)})


@api.operation("listStocks")
async def list_stocks(call: Call[MarketState]) -> Response:
    market, keyword = call.query.get("market"), call.query.get("keyword")
    items = [
        {"ts_code": code, "name": name, "market": mkt, "list_date": listed.strftime("%Y%m%d")}
        for code, (name, mkt, listed, _) in sorted(STOCKS.items())
        if (market is None or mkt == market) and (keyword is None or keyword in name or keyword in code)
    ]
    return json_response({"items": items, "total": len(items)})


@api.operation("listDailyKline")
async def list_daily_kline(call: Call[MarketState]) -> Response:
    q = call.query
    ts_code: str = q["ts_code"]
    if ts_code not in STOCKS:
        raise ApiError(404, "UNKNOWN_STOCK", f"no stock {ts_code}; see listStocks", field="ts_code")
    start = _parse(q["start_date"], "start_date")
    end = _parse(q["end_date"], "end_date")
    if end < start:
        raise ApiError(422, "INVALID_RANGE", "end_date is before start_date", field="end_date")
    if (end - start).days > MAX_RANGE_DAYS:
        raise ApiError(
            422, "RANGE_TOO_LARGE", f"at most {MAX_RANGE_DAYS} days per request; split the range", field="end_date"
        )
    if start > today():
        raise ApiError(422, "FUTURE_DATE", f"{q['start_date']} is in the future", field="start_date")
    call.state.lookups += 1
    name, _, listed, _ = STOCKS[ts_code]
    end = min(end, today())
    days = []
    day = max(start, listed)
    while day <= end:
        if is_trading_day(day):
            days.append(day)
        day += dt.timedelta(days=1)
    offset, limit = q["offset"], q["limit"]
    page = days[offset : offset + limit]
    next_offset = offset + limit if offset + limit < len(days) else None
    return json_response(
        {
            "ts_code": ts_code,
            "name": name,
            "items": [candle(ts_code, d) for d in page],
            "total": len(days),
            "next_offset": next_offset,
        }
    )
