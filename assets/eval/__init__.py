"""Evaluation assets: benchmark items from their native files, and the report of a configured model."""

from assets.eval.assets import EVAL_ASSETS, EvalItemsConfig, EvalReportConfig, eval_items_asset, eval_report

__all__ = ["EVAL_ASSETS", "EvalItemsConfig", "EvalReportConfig", "eval_items_asset", "eval_report"]
