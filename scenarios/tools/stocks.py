"""A stock price look-up for the scenarios: its result has an amount and a unit, to be spoken as given."""

from __future__ import annotations

PRICES = {"AAPL": "187 dollars and 42 cents", "MSFT": "411 dollars and 5 cents"}

__all__ = ["get_stock_price"]


def get_stock_price(ticker: str) -> str:
    """The last price a stock traded at, by its ticker symbol (AAPL, MSFT)."""
    symbol = ticker.strip().upper()
    price = PRICES.get(symbol)
    return f"{symbol} last traded at {price}." if price else f"There is no stock with the ticker {symbol}."
