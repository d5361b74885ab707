"""Who may call the service and what a call may spend (issue 24): keys with scopes, rates and budgets
(:mod:`.keys`, :mod:`.store`), the request's principal (:mod:`.principal`; its spend meter is
:mod:`ragnarok.core.meter`, below the stages that count into it), the worst-case cost of a request computed before it
runs (:mod:`.cost`), and the ASGI middleware that puts them together (:mod:`.middleware`)."""
