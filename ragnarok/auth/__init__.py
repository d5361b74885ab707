"""Who may call the service and what a call may spend: keys with scopes, rates and budgets (:mod:`.store`,
:mod:`.rates`), the request's principal (:mod:`.principal`; its spend meter is :mod:`ragnarok.core.meter`,
below the stages that count into it) and the worst-case cost of a request computed before it runs
(:mod:`.cost`). A store, below the service: it imports the arena's database code, the stages (for worst-case
costs), core and runtime."""
