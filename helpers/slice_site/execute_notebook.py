"""Executes one notebook with nbclient in the working directory it is started in: ``python execute_notebook.py
<notebook> <seconds>``. A standalone script (no ``helpers`` import), so a slice can run any commit's notebooks."""
import sys

import nbformat
from nbclient import NotebookClient

notebook = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(notebook, timeout=int(sys.argv[2]), kernel_name="python3").execute()
