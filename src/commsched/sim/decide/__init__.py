"""The decisions' room: asking the policy on every arrival and departure, and applying what it decides.

* :mod:`.decisions`: per contention domain, the policy's routes, classes and time shifts, installed;
* :mod:`.domains`: the contention domains (jobs that can ever share a link);
* :mod:`.partition`: the components (jobs joined through links that can saturate).
"""
