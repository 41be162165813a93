"""``python -m tableswap``, and the file spark-submit runs as its application (docs/sql.md):

    spark-submit --master yarn "$(python3 -c 'import tableswap, pathlib; \
        print(pathlib.Path(tableswap.__file__).with_name("__main__.py"))')" sql -f daily.sql

Run as a file, Python puts this file's own directory first on ``sys.path``: it is taken off, so that the
package's modules (``airflow``, ``spark``, ``config``...) never shadow top-level ones.
"""

import os
import sys

if sys.path and os.path.abspath(sys.path[0] or os.curdir) == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

from tableswap.cli import main

main()
