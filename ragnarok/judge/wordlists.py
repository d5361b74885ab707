"""The word lists behind the proxy judge's surface rules (:mod:`ragnarok.judge.textrules`): function words,
auxiliaries and common verbs, negation cues, antonym pairs, type and encoding names, the heads that say what a
name names, and the affixes that make a word an inflection of an ordinary one.

Data only, kept apart from the rules that read them so that a list can be read (and extended) whole. Changing
one changes the proxy judge's labels: the thresholds are calibrated on the dev topics of
``bench/judge_families.py``.
"""

from __future__ import annotations

NEGATIONS = frozenset("not no never none nothing neither nor nobody nowhere".split())  # "cannot", "n't": textrules

FUNCTION = frozenset(
    """a an the of to in on for with by as at from into onto over under about than then
 is are was were be been being am it its it's that which who whom whose this these those and or but if so
 you your we our they their them he she his her can could will would should must may might shall has have
 had do does did not no never each every all any some one when where how what why there here also only
 both either neither nor just very too such own same other another always often usually instead
 something anything everything nothing i me my""".split()
)
LINKS = frozenset(
    """a an the of to in on for with by from into about it its this these those that you your
 them their his her our us me no every each some any all""".split()
)
AUXILIARIES = frozenset(
    """is are was were be been am isn't aren't wasn't weren't can cannot could will would
 should must may might shall has have had do does did don't doesn't didn't can't won't shouldn't""".split()
)
VERBS = """accept access add allow append apply assign avoid build call cause change check choose close collect
 combine compare compile compress compute connect contain convert copy count create declare decode decompress
 define delete describe detect determine do encode ensure enter exist expect extract fail fetch fill find
 follow format generate get give go guess handle hold ignore implement import include insert install iterate
 join keep let limit list load lock log look make map match mean measure merge modify move need open order
 parse pass perform pick print process produce provide put raise read receive record reduce register remove
 replace report represent require reset resolve respond restore return reuse run save search see select send
 serialize set show skip sleep sort specify split start stop store strip support take tell test throw treat
 try turn update use validate verify wait walk want work wrap write yield acquire release spawn schedule
 block await cancel emit track trigger escape quote match render sign hash encrypt decrypt stream buffer
 flush seed shuffle sample accept reject compute round truncate pad join notify lose keep become behave
 belong depend differ happen lead lie matter offer own remain seem stay suit""".split()
IRREGULAR = frozenset(
    """built chose chosen found gave given got gotten held kept led made meant put ran read
 sent set shown spent split stood taken told thrown went written wrote lost became""".split()
)
ANTONYM_PAIRS = tuple(
    p
    for x, y in (
        ("read", "write"),
        ("open", "close"),
        ("compress", "decompress"),
        ("encode", "decode"),
        ("encrypt", "decrypt"),
        ("serialize", "deserialize"),
        ("always", "never"),
        ("true", "false"),
        ("synchronous", "asynchronous"),
        ("mutable", "immutable"),
        ("before", "after"),
        ("start", "stop"),
        ("add", "remove"),
        ("include", "exclude"),
        ("enable", "disable"),
        ("allow", "forbid"),
        ("allow", "prevent"),
        ("safe", "unsafe"),
        ("secure", "insecure"),
        ("increase", "decrease"),
        ("more", "less"),
        ("first", "last"),
        ("sorted", "unsorted"),
        ("input", "output"),
        ("lock", "unlock"),
        ("accept", "reject"),
        ("succeed", "fail"),
        ("visible", "hidden"),
        ("local", "global"),
        ("minimum", "maximum"),
        ("min", "max"),
        ("upper", "lower"),
        ("fast", "slow"),
        ("slower", "faster"),
        ("blocking", "nonblocking"),
        ("required", "optional"),
        ("positional", "keyword"),
        ("static", "dynamic"),
        ("explicit", "implicit"),
        ("manual", "automatic"),
        ("manually", "automatically"),
        ("inside", "outside"),
        ("ascending", "descending"),
        ("lossless", "lossy"),
        ("thread-safe", "unsafe"),
        ("deterministic", "random"),
        ("same", "different"),
        ("empty", "full"),
        ("keep", "discard"),
        ("ignore", "respect"),
        ("raise", "suppress"),
        ("plain", "formatted"),
        ("inclusive", "exclusive"),
        ("including", "excluding"),
        ("shallow", "deep"),
        ("lazy", "eager"),
        ("recursive", "flat"),
        ("temporary", "permanent"),
        ("create", "delete"),
        ("largest", "smallest"),
        ("biggest", "smallest"),
        ("highest", "lowest"),
        ("most", "least"),
        ("nlargest", "nsmallest"),
        ("up", "down"),
    )
    for p in ((x, y), (y, x))
)
ANTONYMS = dict(ANTONYM_PAIRS)  # one partner per word; stem_antonyms() keeps them all ("smallest": largest, biggest)
TYPES = {
    w: (group, canonical)
    for group, spec in {
        "data": "list string:str integer:int float dictionary:dict tuple set bytes boolean:bool iterator generator "
        "array",
        "encoding": "hex:hexadecimal base64 ascii utf-8:utf8",
    }.items()
    for item in spec.split()
    for canonical in [item.split(":")[0]]
    for w in item.split(":")
}

NAME_HEADS = {
    h: group
    for group, heads in {
        "module": "module package library lib",
        "class": "class type",
        "function": "function method helper",
        "argument": "argument parameter flag option keyword",
        "exception": "exception error",
        "attribute": "attribute field property",
    }.items()
    for h in heads.split()
}
NEG_PREFIXES = ("un", "in", "im", "non", "dis", "de")

SUFFIXES = (
    "s",
    "es",
    "ed",
    "d",
    "ing",
    "ly",
    "al",
    "able",
    "ible",
    "er",
    "ers",
    "ment",
    "ness",
    "ity",
    "ize",
    "ise",
    "ion",
    "ions",
)
PREFIXES = ("sub", "un", "re", "pre", "de", "non", "over", "super", "multi", "in", "im", "dis", "co", "inter")


INFLECTED = ("s", "ed", "ing", "ly", "able", "ible", "ive", "ion", "ions")

DETERMINERS = frozenset("the a an its this that their your our".split())


GENERIC_NAMES = frozenset(
    "standard same new own other builtin built-in python's python main underlying "
    "dedicated separate whole one-shot helper custom".split()
)

VERB_SET = frozenset(VERBS)
