# SPDX-License-Identifier: Apache-2.0

"""The development cloud's Neutron: Neutron's own API on SQLite.

Two things Neutron 29 itself does not do for a cloud on SQLite:

* ``python neutron_api.py create-schema URL`` creates Neutron's tables
  from its models (``neutron.db.migration.models.head``, as Neutron's own
  unit tests get their schema): ``neutron-db-manage upgrade heads`` stops
  on SQLite (alembic cannot ALTER constraints there).  ``neutron-db-manage
  stamp heads`` follows, so the database says it is at the migrations'
  heads.
* gunicorn serves ``neutron_api:application()`` (this directory on its
  ``pythonpath``): every model imported and the ORM mappers configured
  first, then Neutron's WSGI entry point (``neutron.wsgi.api``, which
  reads ``OS_NEUTRON_CONFIG_DIR`` and ``OS_NEUTRON_CONFIG_FILES``).
  Otherwise ``Port`` lacks the relationships other models add as
  backrefs until some query configures the mappers: ``GET /v2.0/ports``
  as the first request (nova-api's, for a server's security groups) ends
  in "type object 'Port' has no attribute 'port_forwardings'".

This file is loaded as a file, never as
``gpu_nova_ext_dev.cloud.neutron_api``: the tests package forbids
importing eventlet (Nova's native-threading guard,
``gpu_nova_ext/tests/__init__.py``), and Neutron's WSGI code imports it
(``oslo_service.wsgi``).  So it imports nothing of gpu_nova_ext either.
"""
import sys


def application():
    """Neutron's API WSGI application, every model mapped first."""
    from neutron.db.migration.models import head  # noqa: F401
    from sqlalchemy import orm
    orm.configure_mappers()
    from neutron.wsgi import api
    return api.application


def create_schema(url: str) -> int:
    """Create Neutron's tables in database ``url``; their number."""
    from neutron.db.migration.models import head
    import sqlalchemy
    engine = sqlalchemy.create_engine(url)
    try:
        metadata = head.get_metadata()
        metadata.create_all(engine)
        return len(metadata.tables)
    finally:
        engine.dispose()


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != 'create-schema':
        print('usage: python neutron_api.py create-schema DATABASE_URL',
              file=sys.stderr)
        return 2
    print('%d tables' % create_schema(argv[1]))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
