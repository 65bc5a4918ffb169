"""The Go text/template subset with Sprig functions."""

from __future__ import annotations

from typing import Any

import pytest

from nfd.rules.template import Template, TemplateError

DATA: dict[str, Any] = {
    "pci": {
        "device": [
            {"class": "0380", "vendor": "8086", "device": "56c0"},
            {"class": "0300", "vendor": "8086", "device": "56a0"},
        ]
    },
    "cpu": {"cpuid": [{"Name": "AVX"}, {"Name": "AVX2"}], "model": [{"Name": "family", "Value": "6"}]},
    "kernel": {"config": [{"Name": "X86", "Value": "y"}]},
    "memory": {"nv": []},
}


def render(src: str, data: Any = DATA) -> str:
    return Template(src).render(data)


@pytest.mark.parametrize(
    ("src", "out"),
    [
        # text, fields, range over instances / flags / attributes
        ("{{ range .pci.device }}{{ .class }}-{{ .device }};{{ end }}", "0380-56c0;0300-56a0;"),
        ("{{ range .cpu.cpuid }}{{ .Name }} {{ end }}", "AVX AVX2 "),
        ("{{ range .cpu.model }}{{ .Name }}={{ .Value }}{{ end }}", "family=6"),
        # trimming and comments
        ("a  {{- 1 -}}  b", "a1b"),
        ("a{{/* a comment */}}b", "ab"),
        ("a {{- /* trimmed comment */ -}} b", "ab"),
        # variables, assignment, range variables, $
        ("{{ $n := len .pci.device }}{{ $n }}", "2"),
        ("{{ $x := 1 }}{{ $x = 2 }}{{ $x }}", "2"),
        ("{{ range $i, $d := .pci.device }}{{ $i }}{{ $d.device }} {{ end }}", "056c0 156a0 "),
        ("{{ range $d := .pci.device }}{{ $d.class }}{{ end }}", "03800300"),
        ("{{ range .pci.device }}{{ len $.cpu.cpuid }}{{ end }}", "22"),
        # if / else if / else, with, range else, break/continue, range over int and map
        ("{{ if gt (len .pci.device) 1 }}many{{ else }}few{{ end }}", "many"),
        ("{{ if eq 1 2 }}a{{ else if eq 2 2 }}b{{ else }}c{{ end }}", "b"),
        ("{{ with .kernel.config }}{{ len . }}{{ end }}", "1"),
        ("{{ with .memory.nv }}x{{ else }}none{{ end }}", "none"),
        ("{{ range .memory.nv }}x{{ else }}empty{{ end }}", "empty"),
        (
            "{{ range 4 }}{{ if eq . 1 }}{{ continue }}{{ end }}{{ if eq . 3 }}{{ break }}{{ end }}{{ . }}{{ end }}",
            "02",
        ),
        ('{{ range $k, $v := dict "b" 2 "a" 1 }}{{ $k }}{{ $v }}{{ end }}', "a1b2"),
        # pipelines, parenthesised pipelines with fields, index
        ("{{ (index .pci.device 0).device }}", "56c0"),
        ("{{ (.pci.device | first).class | trim | substr 0 2 }}", "03"),
        ('{{ index .pci.device 1 "vendor" }}', "8086"),
        ("{{ .pci.device | len }}", "2"),
        # literals and printing
        ('{{ "a\\tb" }}{{ `raw\\n` }}{{ 0x10 }}{{ 1.5 }}{{ true }}', "a\tbraw\\n161.5true"),
        # fmt.Sprint: a space only between operands that are both non-strings
        ('{{ print 1 2 "a" "b" 3 }}', "1 2ab3"),
        (
            '{{ printf "%s=%d %05.1f %x %q %v %t" "k" 7 3.14159 255 "q" .cpu.model true }}',
            'k=7 003.1 ff "q" [map[Name:family Value:6]] true',
        ),
        ('{{ printf "%d" }}', "%!d(MISSING)"),
        ('{{ println "a" 1 }}', "a 1\n"),
        # logic and comparisons
        ('{{ and 1 0 2 }}|{{ or 0 "" "x" }}|{{ not 0 }}', "0|x|true"),
        ("{{ if and .cpu.cpuid (eq (len .cpu.cpuid) 2) }}y{{ end }}", "y"),
        ('{{ eq "a" "b" "a" }}{{ ne 1 2 }}{{ lt 1 2 }}{{ le 2 2 }}{{ ge "b" "a" }}', "truetruetruetruetrue"),
        ('{{ slice "abcdef" 1 3 }}', "bc"),
    ],
)
def test_constructs(src: str, out: str) -> None:
    assert render(src) == out


@pytest.mark.parametrize(
    ("src", "out"),
    [
        ('{{ trim "  x  " }}', "x"),
        ('{{ trimAll "-" "--x--" }}', "x"),
        ('{{ trimPrefix "pci-" "pci-0300" }}{{ trimSuffix ".present" "a.present" }}', "0300a"),
        ('{{ upper "ab" }}{{ lower "CD" }}{{ title "hello world" }}', "ABcdHello World"),
        ('{{ repeat 3 "ab" }}', "ababab"),
        (
            '{{ substr 1 3 "abcdef" }}|{{ substr 2 99 "abcdef" }}|{{ trunc 2 "abc" }}|{{ trunc -2 "abc" }}',
            "bc|cdef|ab|bc",
        ),
        ('{{ contains "b" "abc" }}{{ hasPrefix "a" "abc" }}{{ hasSuffix "c" "abc" }}', "truetruetrue"),
        ('{{ replace "." "-" "a.b.c" }}|{{ nospace "a b c" }}', "a-b-c|abc"),
        ('{{ quote "a" }} {{ squote "b" }} {{ cat "a" 1 }}', "\"a\" 'b' a 1"),
        ('{{ join "," (splitList ":" "a:b:c") }}', "a,b,c"),
        ('{{ toString 12 }}{{ atoi "42" }}{{ atoi "x" }}{{ int "7" }}{{ float64 "1.5" }}', "124207" + "1.5"),
        (
            '{{ add 1 2 "3" }} {{ add1 1 }} {{ sub 5 7 }} {{ mul 2 3 4 }} {{ div -7 2 }} {{ mod -7 2 }}',
            "6 2 -2 24 -3 -1",
        ),
        ("{{ max 1 9 3 }}{{ min 4 2 8 }}", "92"),
        (
            '{{ default "d" "" }}{{ default "d" "x" }}{{ empty "" }}{{ coalesce "" 0 "z" }}{{ ternary "y" "n" true }}',
            "dxtruezy",
        ),
        ("{{ list 1 2 3 | last }}{{ list 1 2 3 | rest | first }}{{ list 1 2 3 | initial | len }}", "322"),
        (
            "{{ append (list 1) 2 }}{{ prepend (list 1) 0 }}{{ concat (list 1) (list 2) }}{{ reverse (list 1 2) }}",
            "[1 2][0 1][1 2][2 1]",
        ),
        (
            '{{ uniq (list 1 1 2) }}{{ compact (list 0 "" 3) }}{{ has 2 (list 1 2) }}{{ sortAlpha (list "b" "a") }}',
            "[1 2][3]true[a b]",
        ),
        ('{{ $d := dict "k" "v" }}{{ get $d "k" }}{{ hasKey $d "x" }}{{ keys $d }}', "vfalse[k]"),
        (
            '{{ regexMatch "^0[23]" "0300" }}{{ regexFind "[0-9]+" "ab12c" }}{{ regexFindAll "[0-9]" "a1b2c3" 2 }}',
            "true12[1 2]",
        ),
        (
            '{{ regexReplaceAll "(a)(b)" "xaby" "${2}$1" }}{{ regexReplaceAllLiteral "a" "aa" "$1" }}{{ regexSplit "," "a,b,c" -1 }}',
            "xbay$1$1[a b c]",
        ),
        ('{{ b64enc "hi" }} {{ b64dec "aGk=" }} {{ toJson (dict "a" 1) }}', 'aGk= hi {"a":1}'),
        ('{{ sha256sum "" | trunc 8 }}', "e3b0c442"),
        ('{{ b64dec "a!" }}', "illegal base64 data at input byte 1"),  # Sprig's value, no error
    ],
)
def test_sprig_functions(src: str, out: str) -> None:
    assert render(src) == out


@pytest.mark.parametrize(
    ("src", "message"),
    [
        ('{{ env "HOME" }}', 'function "env" not defined'),
        ('{{ expandenv "$HOME" }}', 'function "expandenv" not defined'),
        ('{{ getHostByName "x" }}', 'function "getHostByName" not defined'),
        ('{{ define "x" }}y{{ end }}', "not supported"),
        ('{{ template "x" }}', "not supported"),
        ("{{ if 1 }}x", "has no {{end}}"),
        ("{{ end }}", "unexpected {{end}}"),
        ("{{ break }}", "outside {{range}}"),
        ("{{ .pci.device ", "unclosed action"),
    ],
)
def test_unsupported_or_malformed_templates_are_parse_errors(src: str, message: str) -> None:
    t = Template(src)
    assert t.parse_error is not None and message in t.parse_error
    with pytest.raises(TemplateError, match="failed to parse template"):
        t.render(DATA)


@pytest.mark.parametrize(
    ("src", "message"),
    [
        ("{{ .nosuch }}", 'map has no entry for key "nosuch"'),  # missingkey=error
        ("{{ range .pci.device }}{{ .serial }}{{ end }}", 'map has no entry for key "serial"'),
        ("{{ .cpu.cpuid.Name }}", "can't evaluate field Name"),
        ("{{ index .pci.device 5 }}", "index out of range"),
        ('{{ lt 1 "a" }}', "incompatible types"),
        ("{{ div 1 0 }}", "divide by zero"),
        ("{{ first 3 }}", "Cannot find first"),
        ("{{ len 3 }}", "len of type int"),
        ("{{ range true }}{{ end }}", "can't iterate"),
        ("{{ 1 2 }}", "can't give argument to non-function"),
        ("{{ $undefined }}", "undefined variable"),
    ],
)
def test_execution_errors(src: str, message: str) -> None:
    with pytest.raises(TemplateError, match="failed to expand template") as e:
        render(src)
    assert message in str(e.value)


def test_expand_map_lines() -> None:
    t = Template("a=1\n  b = 2 \n\nc=\nd=x=y\n")
    assert t.expand_map({}) == {"a": "1", "b ": " 2", "c": "", "d": "x=y"}
    with pytest.raises(TemplateError, match="missing value"):
        Template("novalue\n").expand_map({})


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    src = "{{ " + "(" * 400 + "1" + ")" * 400 + " }}"
    t = Template(src)
    with pytest.raises(TemplateError):
        t.render({})


@pytest.mark.parametrize(
    ("src", "message"),
    [
        ('{{ upper "a" "b" }}', "wrong number of args for upper: got 2"),
        ('{{ slice "abc" "x" }}', "wrong type of argument"),
        ('{{ regexMatch "(" "a" }}', "error calling regexMatch"),
    ],
)
def test_function_errors_name_the_function(src: str, message: str) -> None:
    with pytest.raises(TemplateError) as e:
        render(src)
    assert message in str(e.value)


@pytest.mark.parametrize(
    ("src", "message"),
    [
        # Go's fmt stops at a width or precision of more than 8 digits: %!(NOVERB).
        ('{{ printf "%99999999999d" 1 }}', None),
        ('{{ repeat 99999999999 "x" }}', "repeat"),
        ("{{ range 99999999999 }}{{ end }}", "range"),
        ('{{ $s := "xxxxxxxx" }}{{ range 40 }}{{ $s = cat $s $s }}{{ end }}', "cat"),
        ('{{ regexMatch "a{99999999999}" "a" }}', "regexMatch"),
        ('{{ printf "%c" 99999999999 }}', None),
        ("{{ $n := 3 }}{{ range 64 }}{{ $n = mul $n $n }}{{ end }}{{ $n }}", None),
    ],
)
def test_templates_that_would_exhaust_memory_or_time_fail_or_end(src: str, message: str | None) -> None:
    """Memory and time stay bounded: a string or a loop beyond the engine's bounds is a
    TemplateError naming the function; Go's own bounds (a printf width, 64-bit
    arithmetic) are kept as Go keeps them."""
    if message is None:
        assert len(Template(src).render({})) < 100
        return
    with pytest.raises(TemplateError, match=message):
        Template(src).render({})


def test_gos_printf_bounds() -> None:
    assert render('{{ printf "a%999999999d|%d" 1 2 }}') == "a%!(NOVERB)%!(EXTRA int=1, int=2)"
    assert render('{{ printf "%.999999999f|" 2.0 }}') == "%!(NOVERB)%!(EXTRA float64=2)"
    assert render('{{ printf "%5d|%.3f" 1 2.0 }}') == "    1|2.000"
    assert render('{{ printf "%c|%c" 99999999999 -1 }}') == "\ufffd|\ufffd"
    assert render("{{ mul 4294967296 4294967296 }}|{{ add 9223372036854775807 1 }}") == (
        "0|-9223372036854775808"
    )
