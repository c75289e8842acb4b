"""The quickstart's CPU-scale reproduction: offline data, every entry script, a report.

tasks.py derives the pretraining corpus and three downstream sets (module classification in the
DBpedia CSV layout, SQuAD 2.0 JSON, RACE JSON) from the docstrings of Python's standard
library; pipeline.py runs the stages through the entry scripts; report.py writes the report.
"""
