"""The live engine stats dock: numbers (panel), pyqtgraph charts (charts), request table
(table)."""
