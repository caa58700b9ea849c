"""The lessons' widgets as the browser tests expect them, and the routine that moves every control of one.

:data:`EXPECTED` lists every widget a lesson displays, in notebook order, with the controls it must
have. A lesson that displays a widget this list lacks (or lacks one it lists) fails its test, and
so does a widget whose controls differ from the list: a new widget or control gets a line here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .lab import Update, images, timed_change

ARTIFACTS = Path(__file__).parent / "artifacts"


@dataclass(frozen=True)
class Panel:
    """What a widget shows at once (for a ``Tab``, one tab): how many controls of each kind.

    Kinds are ``slider``, ``dropdown``, ``checkbox``, ``number`` (a number field) and ``tab``.
    ``fixed`` counts dropdowns with a single choice (e.g. the layer of a one-layer model), which
    cannot be changed and are not driven.
    """

    controls: dict[str, int]
    fixed: dict[str, int] = field(default_factory=dict)
    tab: str = ""  # the tab's title, for a Tab


@dataclass(frozen=True)
class WidgetSpec:
    """One displayed widget: a short name and its panels (one, or one per tab of a ``Tab``)."""

    name: str
    panels: tuple[Panel, ...]


def one(name: str, fixed: dict[str, int] | None = None, **controls: int) -> WidgetSpec:
    return WidgetSpec(name, (Panel(controls, fixed or {}),))


# Lessons 00 and 01 display no widget; they are listed so that a widget added there is caught too.
EXPECTED: dict[str, list[WidgetSpec]] = {
    "00_welcome.ipynb": [],
    "01_seq2seq_bottleneck.ipynb": [],
    "02_bahdanau_attention.ipynb": [one("decode_stepper", dropdown=1, slider=1)],
    "03_luong_attention.ipynb": [
        one("score_playground", number=4 + 4 * 4),  # the query (4 numbers) and four keys (4 each)
        one("temperature_slider", slider=2, checkbox=1),  # d_k, T, "divide by sqrt(d_k)"
        one("temperature_flipbook", slider=1),  # d_k over precomputed frames (jslink, no kernel)
    ],
    "04_self_attention.ipynb": [one("worked_example", number=3 * 4 + 3 * (4 * 3), checkbox=1)],  # X, W_Q, W_K, W_V
    "05_masking_multihead.ipynb": [
        one("mask_lab", slider=2, checkbox=2),
        one("head_viewer", fixed={"dropdown": 1}, dropdown=1),  # one layer: its picker has one choice
    ],
    "06_transformer.ipynb": [
        # Three head viewers in a Tab: the encoder has two layers, the decoder one.
        WidgetSpec(
            "transformer_heads",
            (
                Panel({"dropdown": 2, "tab": 3}, tab="encoder self"),
                Panel({"dropdown": 1, "tab": 3}, {"dropdown": 1}, tab="decoder self"),
                Panel({"dropdown": 1, "tab": 3}, {"dropdown": 1}, tab="cross"),
            ),
        ),
    ],
    "07_coverage_and_supervision.ipynb": [one("coverage_explorer", dropdown=1, slider=1)],  # sentence, step
    "08_monotonic_location_hard.ipynb": [],
    "09_attention_as_explanation.ipynb": [],
    "10_attention_that_points.ipynb": [one("copy_stepper", dropdown=1, slider=1)],  # sentence, step
    "11_decoder_only.ipynb": [one("sampling_explorer", dropdown=2, slider=3)],  # sentence, prefix; T, k, p
    "12_attention_at_scale.ipynb": [one("scale_explorer", slider=3)],  # N, block, KV heads
    "13_attention_beyond_text.ipynb": [one("caption_stepper", dropdown=1, slider=1)],  # scene, step
}

# Controls found in a widget's visible DOM, each marked with data-attnlab-control so Python can reach it.
CONTROLS_JS = r"""
(root) => {
  const visible = el => el.getClientRects().length > 0;
  const label = el => {
    const box = el.closest('.jupyter-widgets');
    const l = box && box.querySelector(':scope > label.widget-label');
    return (l && l.textContent.trim()) || '';
  };
  const found = [];
  const add = (el, kind, extra) => {
    if (!visible(el)) return;
    const id = kind + '-' + found.length;
    el.setAttribute('data-attnlab-control', id);
    found.push({id, kind, label: label(el), disabled: !!el.disabled, ...extra});
  };
  const ctx = document.createElement('canvas').getContext('2d');
  root.querySelectorAll('.widget-dropdown select').forEach(el => {
    // How wide the chosen label is drawn, against the room the closed dropdown gives it (its width
    // less the padding and the arrow), so a label cut short is seen.
    const style = getComputedStyle(el);
    ctx.font = style.font;
    const option = el.options[el.selectedIndex];
    const room = el.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    add(el, 'dropdown', {options: el.options.length, selected: el.selectedIndex,
        labels: [...el.options].map(o => o.text), shown: option ? option.text : '',
        text_px: option ? ctx.measureText(option.text).width : 0, room_px: room});
  });
  root.querySelectorAll('.widget-slider .noUi-handle').forEach(el => add(el, 'slider', {
      now: parseFloat(el.getAttribute('aria-valuenow')), min: parseFloat(el.getAttribute('aria-valuemin')),
      max: parseFloat(el.getAttribute('aria-valuemax')),
      disabled: el.closest('.widget-slider').classList.contains('mod-disabled') || el.closest('[disabled]') !== null}));
  root.querySelectorAll('.widget-checkbox input[type=checkbox]').forEach(el => add(el, 'checkbox', {
      checked: el.checked, label: el.closest('.widget-checkbox').innerText.replace(/[\u200b\s]+/g, ' ').trim()}));
  root.querySelectorAll('input[type=number]').forEach(el => add(el, 'number', {value: el.value}));
  root.querySelectorAll('.lm-TabBar-tab').forEach(el => add(el, 'tab', {
      label: el.innerText.trim(), current: el.classList.contains('lm-mod-current')}));
  return found;
}
"""


def controls(widget) -> list[dict]:
    """The widget's visible controls (see CONTROLS_JS), each reachable as ``[data-attnlab-control=ID]``."""
    widget.evaluate("el => el.querySelectorAll('[data-attnlab-control]').forEach(c => c.removeAttribute('data-attnlab-control'))")
    return widget.evaluate(CONTROLS_JS)


def count(found: list[dict], *, fixed: bool = False) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in found:
        if c["kind"] == "dropdown" and (c["options"] < 2 or c["disabled"]) and not fixed:
            continue
        if fixed and not (c["kind"] == "dropdown" and (c["options"] < 2 or c["disabled"])):
            continue
        out[c["kind"]] = out.get(c["kind"], 0) + 1
    return out


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower()


@dataclass
class WidgetRun:
    """What driving one widget gave: the updates, and the problems seen (empty when all went well)."""

    updates: list[Update] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    screenshots: list[Path] = field(default_factory=list)


def _check_images(shown: list[dict], name: str, what: str, reference: list[dict], run: WidgetRun) -> None:
    """Every displayed picture decodes and is not a fraction of the size it had at first (a blank
    or half-drawn PNG is a few hundred bytes where a drawn one is several KB)."""
    for j, img in enumerate(shown):
        if img["width"] == 0:
            run.problems.append(f"{name}: after {what}, picture {j} does not decode (broken PNG)")
        ref = reference[j]["bytes"] if j < len(reference) else None
        if ref and img["bytes"] is not None and img["bytes"] < 0.3 * ref:
            run.problems.append(
                f"{name}: after {what}, picture {j} has {img['bytes']} bytes, was {ref} when first drawn "
                "(blank or garbled)"
            )


def _drag(page, loc, control: dict):
    """Drag a slider's handle most of the way across its track in small mouse moves (a fast drag)."""
    handle = loc.bounding_box()
    track = loc.locator("xpath=ancestor::div[contains(@class, 'noUi-target')]").bounding_box()
    x0, y = handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2
    middle = (control["min"] + control["max"]) / 2
    # to a quarter of the way from the other end: far, but not to an extreme where other controls may
    # stop mattering (a mask lab with every length 0 looks the same causal or not)
    x1 = track["x"] + track["width"] * (0.25 if control["now"] > middle else 0.75)

    def action():
        page.mouse.move(x0, y)
        page.mouse.down()
        for i in range(1, 11):
            page.mouse.move(x0 + (x1 - x0) * i / 10, y)
        page.mouse.up()

    return action


def _change(
    page, widget, name: str, control: dict, run: WidgetRun, reference: list[dict], step: int, *, drag: bool = False
) -> None:
    loc = widget.locator(f'[data-attnlab-control="{control["id"]}"]')
    kind, label = control["kind"], control["label"] or control["id"]
    if kind == "slider" and drag:
        what = f"slider {label!r} dragged"
        action = _drag(page, loc, control)
    elif kind == "slider":
        key = "ArrowRight" if control["now"] < control["max"] else "ArrowLeft"
        what = f"slider {label!r} {key}"
        loc.focus()
        action = lambda: page.keyboard.press(key)  # noqa: E731
    elif kind == "dropdown":
        target = (control["selected"] + 1 + step) % control["options"]
        if target == control["selected"]:
            target = (target + 1) % control["options"]
        what = f"dropdown {label!r} -> option {target}"
        action = lambda: loc.select_option(index=target)  # noqa: E731
    elif kind == "checkbox":
        what = f"checkbox {label!r} -> {not control['checked']}"
        action = loc.click
    elif kind == "number":
        value = float(control["value"] or 0) + 1.5
        what = f"number field {control['id']} -> {value:g}"

        def action():
            loc.fill(f"{value:g}")
            loc.press("Enter")
    elif kind == "tab":
        what = f"tab {label!r}"
        action = loc.click
    else:
        raise ValueError(f"unknown control kind {kind!r}")
    # a drag sends many values: wait longer for the last one's picture before the next change
    update, shown = timed_change(page, widget, name, what, action, quiet_ms=600 if drag else 150)
    run.updates.append(update)
    if not update.changed:
        run.problems.append(f"{name}: {what} did not change what the widget shows")
        return
    if update.lost_picture and kind != "tab":  # a tab shows another panel's pictures, in one step
        run.problems.append(f"{name}: during {what} a frame showed the widget without its picture")
    if update.draws > 1 and not drag:  # a drag goes through many values, one picture each
        run.problems.append(f"{name}: {what} drew its picture {update.draws} times (once per change is the rule)")
    _check_images(shown, name, what, reference, run)
    if kind == "dropdown":
        _check_dropdown(next(f for f in controls(widget) if f["id"] == control["id"]), name, run)


def _check_dropdown(control: dict, name: str, run: WidgetRun) -> None:
    """A dropdown offers each choice once and shows the chosen label whole."""
    labels = control["labels"]
    twice = sorted({x for x in labels if labels.count(x) > 1})
    if twice:
        run.problems.append(f"{name}: dropdown {control['label']!r} lists {twice} more than once")
    if control["text_px"] > control["room_px"]:
        run.problems.append(
            f"{name}: dropdown {control['label']!r} cuts its label {control['shown']!r} "
            f"({control['text_px']:.0f} px of text in {control['room_px']:.0f} px)"
        )


def drive(page, widget, spec: WidgetSpec, lesson: str) -> WidgetRun:
    """Change every control of one displayed widget, checking after each change that what it shows
    changed and that its pictures are whole; one screenshot per widget (per tab for a Tab)."""
    run = WidgetRun()
    ARTIFACTS.mkdir(exist_ok=True)
    widget.scroll_into_view_if_needed()
    tabs_expected = [p.tab for p in spec.panels if p.tab]
    for t, panel in enumerate(spec.panels):
        name = f"{spec.name}[{panel.tab}]" if panel.tab else spec.name
        found = controls(widget)
        if panel.tab:
            tabs = [c for c in found if c["kind"] == "tab"]
            labels = [c["label"] for c in tabs]
            if labels != tabs_expected:
                run.problems.append(f"{spec.name}: tabs {labels}, expected {tabs_expected}")
                return run
            if not tabs[t]["current"]:
                _change(page, widget, name, tabs[t], run, images(widget), 0)
                found = controls(widget)
        got, fixed = count(found), count(found, fixed=True)
        if got != panel.controls or fixed != panel.fixed:
            run.problems.append(
                f"{name}: controls {got} (fixed {fixed}), expected {panel.controls} (fixed {panel.fixed}): "
                "update EXPECTED in tests/browser/widgets.py if the widget changed on purpose; found "
                + "; ".join(f"{c['kind']} {c['label']!r}" + (f" ({c['options']} options)" if c["kind"] == "dropdown" else "")
                            for c in found)
            )
            return run
        reference = images(widget)
        movable = [c for c in found if c["kind"] != "tab" and not (c["kind"] == "dropdown" and c["id"] in _fixed_ids(found))]
        # Two rounds of sliders and dropdowns (a slider moved, then another choice in a dropdown:
        # the order that broke lesson 02's stepper), one change of each check box and number field;
        # every slider is also dragged fast once (in-between frames were broken in lessons 03 and 05).
        for step in range(2):
            for kind in ("slider", "dropdown") if step else ("slider", "drag", "dropdown", "checkbox", "number"):
                for c in [c for c in movable if c["kind"] == ("slider" if kind == "drag" else kind)]:
                    if c["kind"] in ("slider", "dropdown"):  # where it stands now (another change may have moved it)
                        c = next(f for f in controls(widget) if f["id"] == c["id"])
                    _change(page, widget, name, c, run, reference, step, drag=kind == "drag")
        shot = ARTIFACTS / f"{lesson[:2]}_{slug(name)}.png"
        widget.screenshot(path=str(shot))
        run.screenshots.append(shot)
    return run


def _fixed_ids(found: list[dict]) -> set[str]:
    return {c["id"] for c in found if c["kind"] == "dropdown" and (c["options"] < 2 or c["disabled"])}
