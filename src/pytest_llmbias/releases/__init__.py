"""Recorded releases (:mod:`~pytest_llmbias.releases.release`) and the session as a gate sees it
when its marker names one (:mod:`~pytest_llmbias.releases.view`)."""
