"""The AWS Glue Data Catalog as a catalog (``glue://REGION``): the one package that imports boto3.

``catalog.GlueCatalog`` implements :class:`~tableswap.core.catalog_port.Catalog` with Glue's API; Glue has
no lock, so ``lease.LeaseLock`` is tableswap's own lease in a DynamoDB table (docs/glue.md). boto3 is an
optional extra (``pip install tableswap[glue]``), imported only when a Glue catalog is opened.
"""
