"""What htmx swaps in answers at once. htmx wires the hx-* attributes of new content only when
its swap settles (20 ms later by default); a swap whose content has behaviour of its own
settles at once (`settle:0ms`), so what is typed the moment it arrives is not lost."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.e2e.flows import Connected, add_keyword

# In the task that swapped the keyword chips in, right after it (a microtask, before any
# timer): type the next keyword into the new entry box and press Enter, as a quick typist or
# a test does, before htmx's default settle would have wired that box.
_TYPE_AS_THE_CHIPS_ARRIVE = """(keyword) => {
    document.body.addEventListener('htmx:afterSwap', function typeNext(event) {
        if (event.target.id !== 'keywords-chips') return;
        document.body.removeEventListener('htmx:afterSwap', typeNext);
        queueMicrotask(() => {
            const entry = document.querySelector('#keywords_entry');
            entry.value = keyword;
            entry.dispatchEvent(new KeyboardEvent('keyup', {key: 'Enter', bubbles: true}));
        });
    });
}"""


def test_a_keyword_typed_as_the_chips_come_back_becomes_a_chip(connected: Connected) -> None:
    page = connected.page
    page.goto("/campaigns/new")
    page.evaluate(_TYPE_AS_THE_CHIPS_ARRIVE, "SECOND")
    add_keyword(page, "FIRST")
    expect(page.locator('#keywords-chips .chip[data-chip="SECOND"]')).to_be_visible()
    expect(page.locator("#keywords-chips .chip")).to_have_count(2)
    expect(page.locator("#keywords_entry")).to_have_value("")
