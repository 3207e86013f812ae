"""The setup doctor: every check the server can make of a Meta app's setup, in plain words.

`report` holds what a check says; `server` checks the settings and the webhook handshake
through `PUBLIC_BASE_URL`; `traffic` reads what actually arrived (by webhook or only by the
reconciler); `diagnosis` turns those numbers into a likely cause; `accounts` checks each
connected account live against Instagram; `run` puts it together for the page and remembers
the failures for the overview.
"""
