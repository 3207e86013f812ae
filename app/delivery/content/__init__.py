"""Content: what a delivery says, as pure functions over a campaign's settings.

`compose` builds each kind of DM (the link, the opening DM, the follow prompt, the
follow-up); `follow_gate` decides which of them a delivery sends; `follow_ups` plans the
thank-you after a link; `postbacks` issues and reads the payloads on our buttons.
"""
