"""The HTML both the viewer and the static report render: one Jinja environment, its
templates, SVG charts and span overlays."""
