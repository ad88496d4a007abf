# SPDX-License-Identifier: Apache-2.0

"""A real Placement service embedded in this process.

The simulator (``gpu-nova-ext simulate``) and the functional tests run the
real openstack-placement WSGI application (SQLite, ``noauth2``), so the
agent and Nova's report client talk to it exactly as to a production
Placement: through keystoneauth and requests, with the same URLs, headers
and JSON bodies.  Two ways to reach it:

* loopback HTTP (:meth:`EmbeddedPlacement.start`): :mod:`wsgiref` in a
  thread, as the functional tests use it;
* in process (:meth:`EmbeddedPlacement.mount`): a requests transport
  adapter mounted on a client's session hands each prepared request to
  the WSGI application directly, without a socket or a server thread (the
  simulator: it sends tens of thousands of requests).

A small WSGI middleware in front of the application counts the write
requests (everything but GET/HEAD) the server received, and can run hooks
before a request reaches Placement (tests use them to act as a concurrent
writer, or to answer 503 for a while).

Placement keeps its database engine and its policy enforcer in module
globals, so only one embedded Placement can serve at a time in a process.
"""
import collections
from collections.abc import Callable
import copy
import dataclasses
import io
import json
import os
import threading
from typing import Any
import uuid
from wsgiref import simple_server

from oslo_log import log as logging
import requests
from requests import adapters as requests_adapters
from requests import structures
import webob

LOG = logging.getLogger(__name__)

NOAUTH_TOKEN = 'admin'
#: The endpoint of an in-process Placement (never resolved: see mount()).
IN_PROCESS_ENDPOINT = 'http://placement.embedded.invalid/placement'
WRITE_METHODS = ('POST', 'PUT', 'PATCH', 'DELETE')

#: ``hook(environ) -> None or (status, body)``: a tuple answers the request
#: without passing it to Placement (``status`` like ``'503 Service
#: Unavailable'``, ``body`` JSON-encoded unless it is a str).
Hook = Callable[[dict], Any]


@dataclasses.dataclass
class DirectResponse:
    status: int
    body: Any


class _QuietHandler(simple_server.WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (stdlib signature)
        LOG.debug('embedded placement: ' + format, *args)


class CountingMiddleware:
    """WSGI middleware: counts requests by method, runs hooks first.

    Wrap any Placement WSGI app with it (the embedded server does; tests
    also put it in front of Placement's own fixture) to count the write
    requests a server receives.
    """

    def __init__(self, app=None):
        self.app = app
        self.requests: collections.Counter = collections.Counter()
        self.write_log: list[str] = []
        self.hooks: list[Hook] = []
        self._lock = threading.Lock()

    @property
    def writes(self) -> int:
        """Write requests (POST/PUT/PATCH/DELETE) received so far."""
        with self._lock:
            return sum(self.requests[m] for m in WRITE_METHODS)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.write_log.clear()

    def __call__(self, environ, start_response):
        method = environ['REQUEST_METHOD']
        with self._lock:
            self.requests[method] += 1
            if method in WRITE_METHODS:
                self.write_log.append(
                    '%s %s' % (method, environ.get('PATH_INFO', '')))
            hooks = list(self.hooks)
        for hook in hooks:
            answer = hook(environ)
            if answer is not None:
                status, body = answer
                data = (body if isinstance(body, str)
                        else json.dumps(body)).encode()
                start_response(status, [
                    ('Content-Type', 'application/json'),
                    ('Content-Length', str(len(data))),
                    ('OpenStack-Request-Id', 'req-%s' % uuid.uuid4())])
                return [data]
        return self.app(environ, start_response)


class WsgiAdapter(requests_adapters.BaseAdapter):
    """A requests transport adapter that calls a WSGI app in process."""

    def __init__(self, app: Callable):
        super().__init__()
        self.app = app

    def send(self, request, stream=False, timeout=None, verify=True,
             cert=None, proxies=None):
        body = request.body or b''
        if isinstance(body, str):
            body = body.encode('utf-8')
        req = webob.Request.blank(request.url, method=request.method)
        req.headers.update(request.headers)
        req.body_file = io.BytesIO(body)
        req.content_length = len(body)
        resp = req.get_response(self.app)
        out = requests.Response()
        out.status_code = resp.status_int
        out.reason = resp.status.split(' ', 1)[-1]
        out.headers = structures.CaseInsensitiveDict(resp.headerlist)
        out._content = resp.body
        out.encoding = resp.charset or 'utf-8'
        out.url = request.url
        out.request = request
        out.raw = io.BytesIO(resp.body)
        return out

    def close(self):
        pass


class EmbeddedPlacement:
    """Real Placement over loopback HTTP.

    :param db_path: SQLite file to keep the database in; ``None`` keeps it
        in memory (lost at :meth:`stop` of the process, kept across a
        ``stop()``/``start()`` of the server).
    :param host: address to listen on (loopback by default).
    :param options: ``{(group, option): value}`` set on the application's
        configuration (Placement's own options, e.g. ``('placement',
        'max_allocation_candidates')``); Placement's defaults otherwise.
    """

    def __init__(self, db_path: str | None = None, host: str = '127.0.0.1',
                 thread_yield: bool = True,
                 options: dict[tuple[str, str], Any] | None = None):
        self.db_path = db_path
        self.options = dict(options or {})
        # oslo.db yields the thread at each connection check-in (for
        # eventlet); a single-threaded in-process user has nobody to yield
        # to, and on a busy machine each yield costs a scheduler slice
        self.thread_yield = thread_yield
        self.host = host
        self.port = 0
        self.counter = CountingMiddleware()
        self._app = None
        self._server = None
        self._thread = None
        self._reset_engine = None

    # -- life cycle -------------------------------------------------------

    @property
    def endpoint(self) -> str:
        return 'http://%s:%d/placement' % (self.host, self.port)

    def start(self) -> str:
        """Start serving (building the app on first use); return the URL.

        A restart after :meth:`stop` serves the same database on the same
        port.
        """
        if self._app is None:
            self._app = self._build_app()
        server = simple_server.make_server(
            self.host, self.port, self._dispatch, handler_class=_QuietHandler)
        self.port = server.server_port
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={'poll_interval': 0.05},
            name='embedded-placement', daemon=True)
        self._thread.start()
        LOG.debug('Embedded Placement serving at %s', self.endpoint)
        return self.endpoint

    def stop(self) -> None:
        """Stop serving (connections are refused until :meth:`start`)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(5)
            self._server = None
            self._thread = None

    @property
    def conf(self):
        """The application's configuration (built on first use)."""
        if self._app is None:
            self._app = self._build_app()
        return self._conf

    def mount_endpoint(self) -> str:
        """Build the application; the endpoint :meth:`mount` serves."""
        if self._app is None:
            self._app = self._build_app()
        return IN_PROCESS_ENDPOINT

    def provider_usage(self) -> dict[str, dict[str, tuple[int, int]]]:
        """Total and used of every inventory, in one database query.

        ``{provider uuid: {resource class id: (total, used)}}``, read from
        Placement's database.
        """
        import sqlalchemy
        query = sqlalchemy.text(
            'SELECT rp.uuid, i.resource_class_id, i.total, '
            'COALESCE(SUM(a.used), 0) FROM inventories i '
            'JOIN resource_providers rp ON rp.id = i.resource_provider_id '
            'LEFT JOIN allocations a ON '
            'a.resource_provider_id = i.resource_provider_id AND '
            'a.resource_class_id = i.resource_class_id '
            'GROUP BY rp.uuid, i.resource_class_id, i.total')
        out: dict[str, dict[str, tuple[int, int]]] = {}
        with self._engine.connect() as conn:
            for rp, rc, total, used in conn.execute(query):
                out.setdefault(rp, {})[rc] = (int(total), int(used))
        return out

    def custom_classes_offered(self) -> set[str]:
        """Custom resource classes some provider has inventory of."""
        import sqlalchemy
        query = sqlalchemy.text(
            'SELECT DISTINCT rc.name FROM inventories i JOIN '
            'resource_classes rc ON rc.id = i.resource_class_id')
        with self._engine.connect() as conn:
            return {name for (name,) in conn.execute(query)}

    def mount(self, session: Any) -> str:
        """Serve ``session``'s requests in process; return the endpoint.

        ``session`` is a keystoneauth ``Session`` (or a requests one): its
        requests to :data:`IN_PROCESS_ENDPOINT` go to the application
        through :class:`WsgiAdapter`, counted and hooked like HTTP ones.
        """
        if self._app is None:
            self._app = self._build_app()
        session = getattr(session, 'session', session)
        session.mount(IN_PROCESS_ENDPOINT.rsplit('/', 1)[0],
                      WsgiAdapter(self._dispatch))
        return IN_PROCESS_ENDPOINT

    def close(self) -> None:
        """Stop serving and release the database."""
        self.stop()
        if self._reset_engine is not None:
            self._reset_engine()
            self._reset_engine = None
            from placement import policy
            policy.reset()
        self._app = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()

    # -- counters and helpers --------------------------------------------

    @property
    def writes(self) -> int:
        """Write requests (POST/PUT/PATCH/DELETE) served so far."""
        return self.counter.writes

    @property
    def requests(self) -> collections.Counter:
        """Requests served so far, by HTTP method."""
        return self.counter.requests

    @property
    def write_log(self) -> list[str]:
        """``METHOD /path`` of each write request served so far."""
        return self.counter.write_log

    @property
    def hooks(self) -> list[Hook]:
        """Called with the WSGI environ before each request; see Hook."""
        return self.counter.hooks

    def reset_counters(self) -> None:
        self.counter.reset()

    def direct_request(self, method: str, path: str, body: Any = None,
                       version: str = '1.39') -> DirectResponse:
        """Call the Placement app in-process, uncounted, without hooks.

        For hooks that act as another writer while a request is held.
        """
        import webob
        req = webob.Request.blank(path, method=method)
        req.headers['X-Auth-Token'] = NOAUTH_TOKEN
        req.headers['OpenStack-API-Version'] = 'placement %s' % version
        req.headers['Accept'] = 'application/json'
        if body is not None:
            req.body = json.dumps(body).encode()
            req.content_type = 'application/json'
        resp = req.get_response(self._app)
        try:
            data = json.loads(resp.body) if resp.body else None
        except ValueError:
            data = resp.body.decode(errors='replace')
        return DirectResponse(resp.status_int, data)

    # -- internals --------------------------------------------------------

    def _dispatch(self, environ, start_response):
        # strip the /placement prefix as a reverse proxy would
        path = environ.get('PATH_INFO', '')
        if path.startswith('/placement'):
            environ['SCRIPT_NAME'] = '/placement'
            environ['PATH_INFO'] = path[len('/placement'):] or '/'
        return self.counter(environ, start_response)

    def _build_app(self):
        from oslo_config import cfg
        from oslo_db.sqlalchemy import engines
        from oslo_policy import opts as policy_opts
        from placement import conf as placement_conf
        from placement.db.sqlalchemy import migration
        from placement import db_api
        from placement import deploy
        from placement.objects import resource_class
        from placement.objects import trait
        from placement import policies
        from placement import policy

        url = ('sqlite:///%s' % os.path.abspath(self.db_path)
               if self.db_path else 'sqlite://')
        conf = cfg.ConfigOpts()
        placement_conf.register_opts(conf)
        policy_opts.set_defaults(conf, enforce_new_defaults=False)
        conf.set_override('auth_strategy', 'noauth2', group='api')
        conf.set_override('connection', url, group='placement_database')
        conf.set_override('sync_on_startup', False,
                          group='placement_database')
        for (group, name), value in self.options.items():
            conf.set_override(name, value, group=group)
        conf([], project='placement', default_config_files=[],
             default_config_dirs=[])
        # The context manager is a process global that can be configured
        # only once; patch our own engine into it instead.
        if not getattr(db_api.configure, 'called', False):
            db_api.configure(conf)
        engine = engines.create_engine(url, max_retries=0,
                                       thread_checkin=self.thread_yield)
        if self.db_path:
            _tune_sqlite(engine)
        self._engine = engine
        migration.create_schema(engine)
        self._reset_engine = db_api.placement_context_manager.patch_engine(
            engine)
        trait._TRAITS_SYNCED = False
        resource_class._RESOURCE_CLASSES_SYNCED = False
        policy.reset()
        policy.init(conf, suppress_deprecation_warnings=True,
                    rules=copy.deepcopy(policies.list_rules()))
        app = deploy.loadapp(conf)
        self._conf = conf
        self.counter.app = app
        return app


def _tune_sqlite(engine) -> None:
    """A throw-away database: no fsync, the journal in memory.

    The file lives as long as the process uses it; durability across a
    crash buys nothing and costs a disk flush per write.
    """
    import sqlalchemy

    @sqlalchemy.event.listens_for(engine, 'connect')
    def _pragmas(dbapi_conn, _record):
        cursor = dbapi_conn.cursor()
        cursor.execute('PRAGMA synchronous = OFF')
        cursor.execute('PRAGMA journal_mode = MEMORY')
        cursor.execute('PRAGMA temp_store = MEMORY')
        cursor.close()
