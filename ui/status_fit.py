"""The status bar's engine figures fitted to its width (issue #50: at 900 px, with models
loaded beside the default one, the names were cut). What gives way, in order: the model's
description (the model button beside it already names the model), then the figures' less
telling parts (batch and done; "generating" said "gen"), then the model name before them,
shortened in its middle. The labels that stretch (the other models' list) shorten
themselves (ElidedLabel); every shortened text is whole in its tooltip."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QLabel, QSizeGrip, QStatusBar, QWidget

SPACING = 12  # a status bar item's margins and the gap to the next
FLEX_MIN = 140  # what a stretching label keeps: a name's start and end around its …
DESCRIPTION_MIN = 200  # less room than this: the description goes
NAME_MIN = 60  # the figures' model name is never shortened below this
NAME_NARROW = 150  # nor kept above this when room is short: the others' list needs some
TIP = "Live figures of {model}, the model of the chat in front."


class StatusFit(QObject):
    """`show(model, full, short)`: the front chat's model's figures (`model` None: the
    default model's, said without a name), as long as fits; `droppable` is hidden when
    the room is short, `flexible` keep FLEX_MIN each."""

    def __init__(self, bar: QStatusBar, figures: QLabel, droppable: QWidget,
                 flexible: Sequence[QWidget]) -> None:
        super().__init__(bar)
        self._bar = bar
        self._figures = figures
        self._droppable = droppable
        self._flexible = tuple(flexible)
        self._shown: tuple[str | None, str, str] = (None, "", "")
        self.dropped = False  # the description is hidden for want of room
        bar.installEventFilter(self)

    def show(self, model: str | None, full: str, short: str) -> None:
        if (model, full, short) != self._shown:
            self._shown = (model, full, short)
            self.fit()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's
        if watched is self._bar and event.type() == QEvent.Type.Resize:
            self.fit()
        return False

    def fit(self) -> None:
        model, full, short = self._shown
        metrics = self._figures.fontMetrics()
        whole = f"{model}: {full}" if model and full else full
        free = self._bar.width() - SPACING - self._fixed_width() \
            - FLEX_MIN * sum(not w.isHidden() for w in self._flexible)
        wide = metrics.horizontalAdvance(whole) + SPACING
        if free >= wide or not full:
            text = whole
        elif model:
            room = free - metrics.horizontalAdvance(f": {short}") - SPACING
            name = metrics.elidedText(model, Qt.TextElideMode.ElideMiddle,
                                      min(max(room, NAME_MIN), NAME_NARROW))
            text = f"{name}: {short}"
        else:
            text = short
        self.dropped = free - metrics.horizontalAdvance(text) - SPACING < DESCRIPTION_MIN
        self._droppable.setHidden(self.dropped)
        self._figures.setText(text)
        tip = TIP.format(model=model or "the default model") if full else ""
        self._figures.setToolTip(f"{whole}\n{tip}" if text != whole else tip)

    def _fixed_width(self) -> int:
        """The room the status bar's other items take (the model button, Unload, the
        server's and the history's)."""
        mine = {self._figures, self._droppable, *self._flexible}
        return sum(w.sizeHint().width() + SPACING
                   for w in self._bar.findChildren(
                       QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly)
                   if w not in mine and not w.isHidden() and not isinstance(w, QSizeGrip)
                   and w.parentWidget() is self._bar and not w.isWindow())
