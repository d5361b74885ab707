"""Frames: the words around a statement that make a sentence assert nothing, or deny what it holds.

One place for them, so that the nugget rules (:mod:`ragnarok.judge.statements`) and citation support
(:mod:`ragnarok.judge.support_rules`) read the same ones: :func:`kind` tells a question, a report, a hedge, a
pointer, empty talk or a denial from a plain statement. Also here: the clause frames of :mod:`statements`.

Design notes: docs/internals/judge.md.
"""

from __future__ import annotations

import re
from functools import lru_cache

DENIAL = re.compile(
    r"\b(?:it|this|that)(?:\s+is|'s|\s+would\s+be|\s+was)\s+(?:\w+\s+)?(?:a\s+|an\s+)?(?:common\s+|popular\s+|"
    r"widespread\s+|complete\s+)?(?:myth|(?-i:false)|untrue|wrong|incorrect|mistaken|misconception|fallacy|"
    r"falsehood|mistake|misunderstanding|inaccurate)\b(?:\s+to\s+\w+)?|"
    r"\b(?:idea|claim|notion|belief|assumption|statement|view|story|rumou?r)s?\s+that\b.*\b(?:is|are|was)\s+"
    r"(?:\w+\s+)?(?:a\s+|an\s+)?(?:myth|(?-i:false)|untrue|wrong|incorrect|mistaken|misconception|fallacy|"
    r"falsehood|nonsense|inaccurate)\b|\bfurther\s+from\s+the\s+truth\b|"
    r"\b(?:is|are)\s+(?:simply\s+|just\s+)?(?:untrue|mistaken|(?:a|an)\s+(?:\w+\s+)?(?:myth|misconception|fallacy|"
    r"falsehood|misunderstanding))\b|"
    r"\b(?:wrongly|falsely|mistakenly|erroneously|incorrectly)\s+(?:\w+\s+)?(?:believe|think|claim|say|assume|"
    r"suppose)s?\b|\bdebunk\w*|\b(?:myth|misconception)s?\s+(?:is|says|goes)\b|"
    r"\b(?:it is|it's|it was) (?:\w+ )?(?:a myth|false|untrue|wrong|incorrect|a (?:\w+ )?misconception|"
    r"a mistake|a fallacy|nonsense|a fiction) (?:to (?:say|think|believe|claim) )?that\b|\b(?:the|a) (?:\w+ )?"
    r"(?:myth|misconception|fallacy) (?:is )?that\b|\bno(?:body| one) (?:says|believes|claims)\b|"
    r"\bit would be (?:wrong|incorrect|a mistake) to\b",
    re.I,
)
REPORT = re.compile(
    r"\b(?:some|many|people|users|developers|programmers|others|critics|beginners|newcomers|folks|someone|"
    r"one)\s+(?:\w+\s+)?(?:say|says|said|claim|claims|claimed|argue|argues|believe|believes|think|thinks|"
    r"suggest|suggests|ask|asks|asked|wonder|wonders|wondered|debate|debates|discuss|discusses|"
    r"assume|assumes|suppose|might\s+think|may\s+think|insist|insists|speculate|speculates)\b|"
    r"\bit\s+is\s+(?:often\s+|sometimes\s+|widely\s+|commonly\s+|frequently\s+)?(?:said|claimed|argued|believed|"
    r"rumou?red|asked|debated|suggested|thought|assumed|alleged|discussed)\b|"
    r"\b(?:unclear|uncertain|unknown|debatable|doubtful|questionable|open\s+question|not\s+clear|not\s+known|"
    r"not\s+certain|hard\s+to\s+say)\s+(?:whether|if|that|how|why)\b|\banyone's\s+guess\b|"
    r"\bremains\s+to\s+be\s+seen\b|"
    r"\b(?:allegedly|supposedly|reportedly|purportedly|rumou?r\s+has\s+it)\b|"
    r"\b(?:is|are|was|remains?)\s+(?:a|an|the)\s+(?:\w+\s+)?(?:question|debate|discussion|matter\s+of\s+"
    r"debate)\b|\bthe\s+question\s+(?:of\s+)?(?:whether|if)\b|\b(?:no\s+one|nobody)\s+knows\b|"
    r"\bi\s+wonder\b|\bwho\s+knows\b|\bcontrary\s+to\b|\b(?:may|might|can|could)\s+or\s+(?:may|might|can|could)\s+not\b|"
    r"\bit\s+(?:is|seems)\s+(?:possible|conceivable|plausible)\s+that\b|\bit\s+has\s+been\s+(?:\w+\s+)?(?:said|"
    r"claimed|suggested|argued|rumou?red|proposed)\b|^(?:imagine|suppose|assume|what\s+if)\b|\bhypothetically\b|"
    r"\bthere\s+is\s+(?:\w+\s+)?(?:debate|discussion|disagreement|confusion)\s+(?:about|over|on|as\s+to)\b|"
    r"\bis\s+(?:often\s+|widely\s+|hotly\s+)?(?:debated|disputed|contested)\b|"
    r"\b(?:is|are|remains?) (?:a|an|the) (?:\w+ ){0,2}(?:question|debate|matter of (?:debate|opinion))\b",
    re.I,
)
WHETHER = re.compile(r"\bwhether\b[^,;:]*", re.I)
IF_FIRST = re.compile(r"^(?:\w+\s+)?(?:if|unless|suppose|supposing|assuming|in\s+case)\b[^,;:]*[,;:]?", re.I)
IF_LATER = re.compile(r"\b(?:if|unless|supposing|assuming|in\s+case)\b[^,;:]*", re.I)
CONDITIONAL = re.compile(r"\b(?:if|unless|when|whenever|in\s+case)\b", re.I)
PIECES = re.compile(
    r"\s*(?:[;:]\s|,?\s(?:and|but|while|whereas|although|though|so|yet|because|since|if|"
    r"unless|when|whenever|which)\s)\s*",
    re.I,
)
LEAD = re.compile(
    r"^(?:\w+,\s*)?(?:(?:it|this)\s+(?:is|would\s+be|was)|it's)\s+(?:simply\s+)?(?:not\s+(?:true|"
    r"the\s+case|so|correct)|(?-i:false)|untrue|wrong|incorrect|mistaken|a\s+(?:\w+\s+)?(?:myth|"
    r"misconception|mistake|fallacy))\b(?:\s+to\s+\w+)?\s+that\b",
    re.I,
)

_MODAL = r"(?:may|might|could|can|does|do|will|would|is|are)"
QUESTION = re.compile(r"\?\s*$|^\s*whether\b", re.I)
HEDGE = re.compile(
    rf"\b{_MODAL} or {_MODAL}\s*(?:not|n't)\b|\bwhether or not\b|\bit depends\b|"
    r"\bdepends? (?:up)?on (?:your|the|what|how|whether|which)\b|"
    r"\b(?:remains?|is|are) (?:still )?(?:unclear|uncertain|unknown|to be seen|debated|"
    r"contested|disputed|open to debate)\b",
    re.I,
)
POINTER = re.compile(
    r"\b(?:is|are|was|were|gets|get) (?:\w+ )?(?:discussed|described|covered|explained|"
    r"mentioned|documented|addressed|treated|talked about|detailed|outlined) (?:in|by|at|"
    r"on|under)\b|^\s*(?:see|refer to|read|consult)\b",
    re.I,
)
# talk about the task, not about the answer: "X is a common need", "there are many ways to ..."
EMPTY = re.compile(
    r"\b(?:is|are) (?:a |an )?(?:\w+ )?(?:common|frequent|useful|popular|easy|simple|typical) "
    r"(?:need|task|technique|thing|problem|question|requirement|job)s?\b|\bthere are (?:several|"
    r"many|various|a few|multiple|different) (?:\w+ )?(?:ways|approaches|options|methods)\b|"
    r"\bsomething (?:you|one|developers|people) (?:may|might|will|often) (?:need|want)\b|\bis easy "
    r"in (?:many|most|any) \w+\b",
    re.I,
)
# a denial the nugget rules read as a negation ("not") under a frame (LEAD): a frame for citation support
NOT_TRUE = re.compile(r"\b(?:it is|it's|it was) (?:\w+ )?not true that\b", re.I)
KINDS = {
    "question": QUESTION,
    "report": REPORT,
    "hedge": HEDGE,
    "pointer": POINTER,
    "empty": EMPTY,
    "denial": re.compile(f"{DENIAL.pattern}|{NOT_TRUE.pattern}", re.I),
}


@lru_cache(maxsize=100_000)
def kind(sentence: str) -> str | None:
    """The frame ``sentence`` is in (see the module's docstring), or None for a plain statement."""
    return next((name for name, pattern in KINDS.items() if pattern.search(sentence)), None)


def asserts_nothing(sentence: str) -> bool:
    """A question, a report, a hedge, a pointer or talk about the task: no fact asserted (a denial asserts
    the opposite)."""
    return kind(sentence) not in (None, "denial")
