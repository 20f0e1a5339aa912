"""Questions on the second held-out corpus (`docs_heldout2_corpus`): 40 paraphrases, 25 keyword questions.

Written by reading the documents as a user would (the raw files, HTML as a browser shows it),
before any of Ember's chunking, indexing or search had run on them, and never changed after
the first measurement. Paraphrases are asked the way someone who half remembers would ask,
avoiding the documents' own distinctive words where that is possible; keyword questions use
the exact terms. Each names the file that answers it (its stem, as `docs_retrieval.ranks`
compares) and a short verbatim quote of the answering text, checked against the files by
tests/test_bench_heldout2.py.

Some are hard on purpose: answers in the middle of long files (the sed FAQ, the bzip2 and
time manuals), near-alike files (two git security notes of the 2.30 line; GNU time's manual
and its NEWS), and words that several files share (exit statuses in xargs, time and the sed
FAQ; command-line length in ninja and xargs; compression in bzip2 and git's notes).
"""

from __future__ import annotations

from typing import NamedTuple


class Question(NamedTuple):
    text: str
    key: str  # the answering file's stem
    quote: str  # verbatim from that file (whitespace aside)


BC_README = "bc-README"
BC_NEWS = "bc-NEWS"
TIME_NEWS = "time-NEWS"
TIME = "time-manual"
SED_BUGS = "sed-BUGS"
SEDFAQ = "sed-sedfaq.txt"
GIT_README = "git-README"
GIT_238 = "git-RelNotes-2.38.0"
GIT_2307 = "git-RelNotes-2.30.7"
GIT_2309 = "git-RelNotes-2.30.9"
GIT_2393 = "git-RelNotes-2.39.3"
DECODER = "nodejs-string_decoder"
QUERYSTRING = "nodejs-querystring"
PATH = "nodejs-path"
NINJA = "ninja-build-manual"
NINJA_COPYRIGHT = "ninja-build-copyright"
BZIP2 = "bzip2-manual"
FONTCONFIG = "fontconfig-user"
CACHEGRIND = "valgrind-cg-manual"
XARGS = "findutils-xargs.1"

PARAPHRASE_SET = (
    Question(
        "How can I build the calculator so that the switch between its simple and its faster way of "
        "multiplying suits my own computer?",
        BC_README,
        "To make a version of bc with a custom crossover point for your machine",
    ),
    Question(
        "Which statement stops the arbitrary-precision calculator only when it is actually executed, unlike quit?",
        BC_README,
        'addition of the "halt" statement that is an executable statement unlike the quit',
    ),
    Question(
        "In which release of the calculator could functions stop returning a value?",
        BC_NEWS,
        "Added void functions.",
    ),
    Question(
        "Why does the command timer no longer print the note about a failing exit status in its portable output mode?",
        TIME_NEWS,
        '"time -p" no longers adds the "Command exited with non-zero status" message.',
    ),
    Question(
        "Which version of the program that measures how long a command runs moved to version 3 of the GNU licence?",
        TIME_NEWS,
        "First official release under GPLv3-or-later.",
    ),
    Question(
        "Editing a file in place worked even though I had write-protected it; is that a defect of the stream editor?",
        SED_BUGS,
        "-i clobbers read-only files",
    ),
    Question(
        "Why does a range of lowercase letters also match capitals under some language settings?",
        SED_BUGS,
        "You are encountering problems with locales.",
    ),
    Question(
        "What did the author of the version control system say its name could stand for?",
        GIT_README,
        'The name "git" was given by Linus Torvalds when he wrote the very first version.',
    ),
    Question(
        "Where should I report a vulnerability in the version control tool without making it public?",
        GIT_README,
        "Issues which are security relevant should be disclosed privately to the Git Security mailing list",
    ),
    Question(
        "Under what terms may the bundled command-line option parsing code of the build tool's package be reused?",
        NINJA_COPYRIGHT,
        "placed in the public domain without restrictions",
    ),
    Question(
        "Uploading my commits to the server is slower with the precomputed acceleration files; can I switch "
        "them off for that command only?",
        GIT_238,
        "The push.useBitmaps configuration variable is introduced",
    ),
    Question(
        "When making a compressed tarball of a repository, does the version control tool still start a separate "
        "compression program?",
        GIT_238,
        'avoid spawning an external "gzip" process when creating ".tar.gz"',
    ),
    Question(
        "Could a crafted attributes file listing an enormous number of patterns let an attacker run code through "
        "the version control tool?",
        GIT_2307,
        "When parsing gitattributes, multiple integer overflows can occur when there is a huge number of path patterns",
    ),
    Question(
        "Who is credited with discovering the overflow in the padding of formatted commit output?",
        GIT_2307,
        "Credit for finding CVE-2022-41903 goes to Joern Schneeweisz of GitLab.",
    ),
    Question(
        "Which security fix dealt with forged entries sneaking new options in when a block of the settings "
        "file is dropped or given a new name?",
        GIT_2309,
        "When renaming or deleting a section from a configuration file",
    ),
    Question(
        "Showing changes hung forever when the pattern for a range of lines could match nothing at a line's end; "
        "which maintenance release fixed it?",
        GIT_2393,
        'the code to parse the "git diff" line-ranges fell into an infinite loop',
    ),
    Question(
        "When I turn raw bytes into text piece by piece in Node, how do I avoid getting half of a character?",
        DECODER,
        "an internal buffer is used to ensure that the decoded string does not contain any incomplete "
        "multibyte characters",
    ),
    Question(
        "Why do the usual object methods not work on what I get from splitting up a URL's parameters?",
        QUERYSTRING,
        "_does not_ prototypically inherit from the JavaScript `Object`",
    ),
    Question(
        "On Windows, why is an upper-case file extension not removed when I take the last part of a path?",
        PATH,
        "`basename` treats the extension as a case-sensitive string",
    ),
    Question(
        "Is checking that a location is absolute enough to protect against escaping the intended directory?",
        PATH,
        "Therefore, it’s not safe for mitigating path traversals.",
    ),
    Question(
        "While the tool that feeds piped input to a command is already running, how can I make it run more "
        "jobs at the same time?",
        XARGS,
        "send its process a SIGUSR1 signal to increase the number of commands to run simultaneously",
    ),
    Question(
        "Why can the utility that builds argument lists from standard input not be used safely where other "
        "users can change files?",
        XARGS,
        "there will always be a time gap between the production of the list of input files and their use",
    ),
    Question(
        "What status does the argument-list builder exit with when the program it was asked to run does not exist?",
        XARGS,
        "if the command is not found",
    ),
    Question(
        "How can I have the timing report written to a file, adding to what is there instead of replacing it?",
        TIME,
        "Append the resource use information to the output file instead of overwriting it.",
    ),
    Question(
        "Which field of the report format gives the most physical memory the measured program ever held?",
        TIME,
        "Maximum resident set size of the process during its lifetime",
    ),
    Question(
        "Under the free documentation licence, how long may the text on a book's back cover be?",
        TIME,
        "a Back-Cover Text may be at most 25 words",
    ),
    Question(
        "How do I stop the expensive linking steps from running too many at once while everything else runs "
        "in parallel?",
        NINJA,
        "Pools allow you to allocate one or more rules or edges a finite number of concurrent jobs",
    ),
    Question(
        "What is the difference between prerequisites that only fix the order of steps and those that force a rebuild?",
        NINJA,
        "changes in order-only dependencies alone do not cause the output to be rebuilt",
    ),
    Question(
        "Windows limits how long a command can be; how does the build tool pass a huge list of object files "
        "to the linker?",
        NINJA,
        "the maximal length of a command line is limited and response files must be used instead",
    ),
    Question(
        "Why does the build tool rebuild my outputs after I changed only the compiler flags?",
        NINJA,
        "Outputs implicitly depend on the command line that was used to generate them",
    ),
    Question(
        "A large compressed archive was damaged in transfer; can I still get back the parts that are intact?",
        BZIP2,
        "it may be possible to recover data from the undamaged blocks in the file",
    ),
    Question(
        "Why do very small files get bigger when I compress them?",
        BZIP2,
        "Files of less than about one hundred bytes tend to get larger",
    ),
    Question(
        "The compression library stopped with an internal error; which error number usually means the "
        "machine's RAM is faulty?",
        BZIP2,
        "unreliable memory is often associated with internal error 1007",
    ),
    Question(
        "How can I hide an ugly typeface so that no application ever picks it?",
        FONTCONFIG,
        "such fonts are excluded from the set of fonts used to resolve list and match requests as if they "
        "didn't exist in the system",
    ),
    Question(
        "Why is a number like .5 not accepted in the font settings file?",
        FONTCONFIG,
        "fontconfig requires that the mantissa start with a digit, not a decimal point",
    ),
    Question(
        "Why is the simulation of mispredicted jumps off by default in the cache profiler?",
        CACHEGRIND,
        "By default this is disabled as it slows Cachegrind down by approximately 25%.",
    ),
    Question(
        "How do I add up the profiles from several runs of the same program into one?",
        CACHEGRIND,
        "merges them together, and writes the results into another file in the same format",
    ),
    Question(
        "How do I put thousands separators into long numbers with the stream editor?",
        SEDFAQ,
        "How do I commify a string of numbers?",
    ),
    Question(
        "The stream editor I run under an old Microsoft system quits halfway through my input without an error; "
        "what in the file could cause that?",
        SEDFAQ,
        "As soon as any DOS version of sed encounters a Ctrl-Z character, sed stops processing.",
    ),
    Question(
        "Which simpler tools should I use instead of the stream editor just to number the lines of a file?",
        SEDFAQ,
        'print line numbers.  Instead, use "nl" or "cat -n".',
    ),
)

KEYWORD_SET = (
    Question("make timetest", BC_README, "make timetest"),
    Question("dc tail recursion", BC_NEWS, "Recognize and handle tail recursion."),
    Question("time MAX-RSS overestimated", TIME_NEWS, "overestimated MAX-RSS"),
    Question("sed z command zap", SED_BUGS, "GNU sed provides a `z' command (for `zap')"),
    Question("What's cooking reports", GIT_README, 'The maintainer frequently sends the "What\'s cooking" reports'),
    Question("Gregory Pietsch getopt", NINJA_COPYRIGHT, "Copyright: 1997 Gregory Pietsch"),
    Question("git rebase --update-refs", GIT_238, 'with "--update-refs" option.'),
    Question("safe.barerepository", GIT_238, "Introduce a safe.barerepository configuration variable"),
    Question("CVE-2022-41903", GIT_2307, "Credit for finding CVE-2022-41903"),
    Question("git apply --reject", GIT_2309, "By feeding specially crafted input to `git apply --reject`"),
    Question("REG_ENHANCED", GIT_2393, "REG_ENHANCED flag"),
    Question("StringDecoder end()", DECODER, "Returns any remaining input stored in the internal buffer as a string."),
    Question("URLSearchParams", QUERYSTRING, "`querystring` is more performant than {URLSearchParams}"),
    Question("path.matchesGlob", PATH, "The `path.matchesGlob()` method determines if `path` matches the `pattern`."),
    Question("xargs process-slot-var", XARGS, "to a unique value in each running child process"),
    Question("wait3 system call", TIME, "Most information shown by time is derived from the wait3 system call."),
    Question("ninja_required_version", NINJA, "ninja_required_version that asserts the minimum Ninja version"),
    Question("msvc_deps_prefix", NINJA, "defines the string which should be stripped from msvc’s /showIncludes output"),
    Question("NINJA_STATUS", NINJA, "NINJA_STATUS, the progress status printed before the rule being run."),
    Question("BZ_CONFIG_ERROR", BZIP2, "Indicates that the library has been improperly compiled on your platform"),
    Question("BZ_NO_STDIO", BZIP2, "compiling the library with preprocessor symbol BZ_NO_STDIO defined"),
    Question("FC_DEBUG", FONTCONFIG, "It is controlled by means of the FC_DEBUG environment variable."),
    Question("cg_diff --mod-funcname", CACHEGRIND, "You can use the --mod-funcname option"),
    Question("cachegrind.out.<pid>", CACHEGRIND, "By default this file is named cachegrind.out.<pid>"),
    Question('"event not found" csh', SEDFAQ, "This error is generated by the csh or tcsh shells, not by sed."),
)

# What the recall bench takes: (question, answer file's stem)
PARAPHRASE = [(q.text, q.key) for q in PARAPHRASE_SET]
KEYWORD = [(q.text, q.key) for q in KEYWORD_SET]
