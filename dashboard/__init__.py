"""The offeval Streamlit dashboard (``streamlit run dashboard/app.py``)."""
