#!/usr/bin/python3
"""The Azure tests' hands on Azurite, through the Azure SDK (Debian's
python3-azure), the connection string in $AZ_CS:

  az_tool.py container NAME             creates a container
  az_tool.py put CONTAINER BLOB FILE    uploads a file as a block blob
  az_tool.py rm CONTAINER BLOB          deletes a blob
  az_tool.py sas CONTAINER              prints a read+list SAS for the container
  az_tool.py badsas CONTAINER           the same SAS with another signature
"""
import os
import sys

from azure.storage.blob import (BlobServiceClient, ContainerSasPermissions,
                                generate_container_sas)
import datetime


def service():
    return BlobServiceClient.from_connection_string(os.environ["AZ_CS"])


def sas(container):
    svc = service()
    return generate_container_sas(
        svc.account_name, container, account_key=svc.credential.account_key,
        permission=ContainerSasPermissions(read=True, list=True),
        expiry=datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=2))


def main(argv):
    cmd = argv[1]
    if cmd == "container":
        service().create_container(argv[2])
    elif cmd == "put":
        with open(argv[4], "rb") as f:
            service().get_blob_client(argv[2], argv[3]).upload_blob(f, overwrite=True)
    elif cmd == "rm":
        service().get_blob_client(argv[2], argv[3]).delete_blob()
    elif cmd == "sas":
        print(sas(argv[2]))
    elif cmd == "badsas":
        parts = dict(p.split("=", 1) for p in sas(argv[2]).split("&"))
        parts["sig"] = ("BBBB" if parts["sig"].startswith("AAAA") else "AAAA") + parts["sig"][4:]
        print("&".join(f"{k}={v}" for k, v in parts.items()))
    else:
        sys.exit(f"az_tool.py: unknown command {cmd}")


if __name__ == "__main__":
    main(sys.argv)
