"""Every POST form in the templates renders the CSRF field and a one-time key.

The CSRF middleware refuses a POST without its token, and handlers that run under
`app.web.idempotency` refuse one without a key ("reload the page"), so a form that forgets
either is broken or double-submittable. This reads the template sources, so a new template
is covered the moment it exists.
"""

from __future__ import annotations

import re

from app.web.templating import TEMPLATE_DIR

_FORM = re.compile(r"<form\b(?P<attrs>[^>]*)>(?P<body>.*?)</form>", re.DOTALL | re.IGNORECASE)
_POST = re.compile(r"""\bmethod\s*=\s*["']?post\b""", re.IGNORECASE)
_ACTION = re.compile(r"""\baction\s*=\s*["']([^"']*)["']""", re.IGNORECASE)
_CSRF = re.compile(r"\{\{\s*csrf_input\s*\|\s*safe\s*\}\}")
_KEY = re.compile(r"\{\{\s*idempotency_input\(\)\s*\}\}")

# POST forms that carry the CSRF token but no one-time key, each for a reason:
NO_KEY = {
    # Signing in makes nothing that a repeat could double: a second submission checks the
    # password again and only rotates the session id once more.
    ("auth/login.html", "/login"),
    # Signing out is idempotent by nature: the repeat finds no session and lands on the
    # same "you are signed out" page.
    ("base.html", "/logout"),
    ("team/invite.html", "/logout"),
    # "Try a comment" asks a question and changes nothing: matching a typed comment against
    # the campaigns writes no row. (It is a POST only because the comment can be long.)
    ("campaigns/try.html", "/campaigns/try"),
}


def _post_forms() -> list[tuple[str, str, str]]:
    """(template, action, form source) of every POST form under templates/."""
    forms = []
    for path in sorted(TEMPLATE_DIR.rglob("*.html")):
        name = path.relative_to(TEMPLATE_DIR).as_posix()
        for match in _FORM.finditer(path.read_text(encoding="utf-8")):
            if not _POST.search(match.group("attrs")):
                continue
            action = _ACTION.search(match.group("attrs"))
            forms.append((name, action.group(1) if action else "", match.group(0)))
    return forms


def test_every_post_form_renders_the_csrf_field_and_a_one_time_key() -> None:
    forms = _post_forms()
    # The scan itself must see the forms; a broken pattern would otherwise pass everything.
    assert len(forms) >= 20, forms
    assert ("auth/signup.html", "/signup") in {(name, action) for name, action, _ in forms}

    no_csrf = [(name, action) for name, action, source in forms if not _CSRF.search(source)]
    assert no_csrf == []
    no_key = [
        (name, action)
        for name, action, source in forms
        if not _KEY.search(source) and (name, action) not in NO_KEY
    ]
    assert no_key == []


def test_the_allowlist_names_only_forms_that_exist_and_still_lack_a_key() -> None:
    # A stale entry would quietly exempt the next form that happens to match it.
    keyless = {(name, action) for name, action, source in _post_forms() if not _KEY.search(source)}
    assert keyless == NO_KEY


def test_the_scan_finds_a_form_that_forgets_its_tokens() -> None:
    source = '<form method="post" action="/x">\n  <button>Go</button>\n</form>'
    [match] = _FORM.finditer(source)
    assert _POST.search(match.group("attrs"))
    assert not _CSRF.search(match.group(0))
    assert not _KEY.search(match.group(0))
