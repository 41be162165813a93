import boto3
s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:47130", aws_access_key_id="k", aws_secret_access_key="s", region_name="us-east-1")
s3.create_bucket(Bucket="warehouse")
s3.put_object(Bucket="warehouse", Key="events/dt=2026-06-01/part-0.parquet", Body=b"x" * 1000)
s3.put_object(Bucket="warehouse", Key="events/_tableswap/old/dt=2026-06-01/part-0.parquet", Body=b"y" * 2000)
print("ok")
