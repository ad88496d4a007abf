# SPDX-License-Identifier: Apache-2.0

"""Placement API client of the agent and the CLI.

A keystoneauth1 adapter built from the ``[placement]`` options (so both
``auth_type = password`` against Keystone and ``auth_type = admin_token``
with ``endpoint``/``token`` against a noauth2 Placement work), with:

* named microversion constants (all >= 1.36);
* keystoneauth's own bounded retries of connection errors and 5xx
  answers (``[placement] max_request_retries`` / ``retry_backoff``, or
  keystoneauth's ``connect_retries`` / ``status_code_retries`` /
  ``retriable_status_codes`` and their delays where set: see
  :func:`retry_arguments`); a request that timed out is not retried;
* generation-checked writes re-read and retried, with jitter, on 409
  ``placement.concurrent_update`` (``[placement] max_conflict_retries``);
* typed errors: :class:`~gpu_nova_ext.exception.PlacementUnavailable`,
  :class:`~gpu_nova_ext.exception.PlacementAPIError` and its subclasses.
"""
from collections.abc import Callable
import random
import threading
from typing import Any
import urllib.parse

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import session as ks_session
from oslo_log import log as logging
import requests

from gpu_nova_ext import exception

LOG = logging.getLogger(__name__)

GROUP = 'placement'

# Microversions, by what needs them.  Placement 16 (2025.2) serves up to
# 1.39; everything here works from 1.36 on.
BASE_VERSION = '1.36'
#: ``GET /resource_providers?in_tree=`` and ``?name=``; POST returns a body
PROVIDERS_VERSION = '1.36'
#: ``PUT /resource_providers/{uuid}/traits``, ``GET/PUT /traits``
TRAITS_VERSION = '1.36'
#: ``PUT /resource_providers/{uuid}/inventories``, ``/usages``
INVENTORY_VERSION = '1.36'
#: ``PUT /resource_classes/{name}`` (idempotent create)
RESOURCE_CLASS_VERSION = '1.36'
#: ``PUT /allocations/{consumer}`` with consumer generations
ALLOCATIONS_VERSION = '1.36'
#: ``GET /allocation_candidates`` with ``root_required`` and ``same_subtree``
ALLOCATION_CANDIDATES_VERSION = '1.36'

CONCURRENT_UPDATE = 'placement.concurrent_update'
INVENTORY_INUSE = 'placement.inventory.inuse'
PROVIDER_IN_USE = 'placement.resource_provider.inuse'

#: the answers a request is retried after: every 5xx (Placement, or the
#: proxy in front of it, failing for now); 4xx answers are ours to fix
RETRIABLE_STATUS_CODES = tuple(range(500, 600))

#: ``[placement] retry_backoff = 0``: the shortest delay keystoneauth
#: takes as a delay
_AT_ONCE = 0.001
#: ``[placement] retry_backoff`` unset: the base of the jittered wait
#: before a generation-conflict retry (keystoneauth's first delay)
_CONFLICT_BACKOFF = 0.5

_BODY_EXCERPT = 300


def excerpt(text: Any) -> str:
    text = text if isinstance(text, str) else repr(text)
    if len(text) > _BODY_EXCERPT:
        return text[:_BODY_EXCERPT] + '...'
    return text


def error_code(exc: exception.PlacementAPIError) -> str | None:
    """The Placement error code (``placement.concurrent_update``) of exc."""
    return exc.kwargs.get('code')


def error_status(exc: exception.PlacementAPIError) -> int | None:
    return exc.kwargs.get('status')


def _check_url(option: str, value: str | None) -> None:
    """An http(s) URL with a host, or InvalidOption naming ``option``."""
    if not value:
        return
    parsed = urllib.parse.urlsplit(value)
    if (parsed.scheme not in ('http', 'https') or not parsed.hostname or
            any(c.isspace() for c in value)):
        raise exception.InvalidOption(
            group=GROUP, option=option, value=value,
            reason='not an http(s) URL (for example '
                   'http://controller/placement)')


def _check_password_options(conf) -> None:
    """``auth_type = password`` needs a user and a password, said now.

    keystoneauth only finds out when it asks Keystone for a token.
    """
    if conf.placement.auth_type not in ('password', 'v3password'):
        return
    group = conf.placement
    missing = []
    if not (getattr(group, 'username', None) or
            getattr(group, 'user_id', None)):
        missing.append('username')
    if not getattr(group, 'password', None):
        missing.append('password')
    if missing:
        raise exception.ConfigError(reason=(
            '[placement] %s required by auth_type = %s %s not set'
            % (' and '.join(missing), conf.placement.auth_type,
               'are' if len(missing) > 1 else 'is')))


def retry_arguments(group) -> dict[str, Any]:
    """keystoneauth's retry arguments from the ``[placement]`` options.

    keystoneauth's own options of the group (``connect_retries``,
    ``status_code_retries``, ``connect_retry_delay``,
    ``status_code_retry_delay``, ``retriable_status_codes``) win where
    set; otherwise ``max_request_retries`` bounds both kinds of retry,
    ``retry_backoff`` is the delay between two (unset: keystoneauth's
    exponential backoff, 0.5 s doubling), and every 5xx is retried.
    """
    def own(name, default):
        value = getattr(group, name, None)
        return default if value is None else value

    retries = group.max_request_retries
    delay = group.retry_backoff
    if delay == 0:
        # keystoneauth reads a delay of 0 as "unset" (exponential)
        delay = _AT_ONCE
    return {
        'connect_retries': own('connect_retries', retries),
        'status_code_retries': own('status_code_retries', retries),
        'connect_retry_delay': own('connect_retry_delay', delay),
        'status_code_retry_delay': own('status_code_retry_delay', delay),
        'retriable_status_codes': list(
            own('retriable_status_codes', None) or RETRIABLE_STATUS_CODES),
    }


class _TimeoutNotRetried(requests.exceptions.RequestException):
    """A request that got no answer within ``[placement] timeout``."""


class _NoRetryOnTimeout(ks_session.TCPKeepAliveAdapter):
    """keystoneauth's transport, with timeouts it does not retry.

    keystoneauth retries a timed-out request as it retries a refused
    connection; a service that took ``[placement] timeout`` seconds not to
    answer would make the agent or the CLI wait that long again for each
    retry.  Raised as another requests error, a timeout reaches us as
    keystoneauth's (not retried) UnknownConnectionError.
    """

    def send(self, *args, **kwargs):
        try:
            return super().send(*args, **kwargs)
        except requests.exceptions.Timeout as exc:
            raise _TimeoutNotRetried(str(exc)) from exc


def _timed_out(exc: Exception) -> bool:
    return isinstance(getattr(exc, 'original', None), _TimeoutNotRetried)


def _load_adapter(conf):
    """Build the keystoneauth adapter; bad or missing options -> ConfigError.

    Each error names the ``[placement]`` option to set.
    """
    try:
        auth = ks_loading.load_auth_from_conf_options(conf, GROUP)
    except ks_exc.MissingRequiredOptions as exc:
        names = ', '.join(o.dest for o in exc.options)
        raise exception.ConfigError(reason=(
            '[placement] %s required by auth_type = %s is not set'
            % (names, conf.placement.auth_type)))
    except ks_exc.NoMatchingPlugin as exc:
        raise exception.InvalidOption(
            group=GROUP, option='auth_type', value=exc.name,
            reason='no such keystoneauth plugin; use password (Keystone) '
                   'or admin_token (noauth2 Placement)')
    if auth is None:
        raise exception.ConfigError(reason=(
            '[placement] auth_type is not set: use auth_type = password '
            '(with auth_url, username, password, project_name, ...) for '
            'Keystone, or auth_type = admin_token (with endpoint and token) '
            'for a noauth2 Placement'))
    if (conf.placement.auth_type == 'admin_token' and
            not conf.placement.endpoint):
        raise exception.ConfigError(reason=(
            '[placement] endpoint is not set, and auth_type = admin_token '
            'needs it (for example endpoint = http://controller/placement)'))
    for option in ('endpoint', 'endpoint_override', 'auth_url'):
        _check_url(option, getattr(conf.placement, option, None))
    _check_password_options(conf)
    retry = retry_arguments(conf.placement)
    # connect_retries here too: Keystone's token and version requests are
    # the session's, not the adapter's
    session = ks_loading.load_session_from_conf_options(
        conf, GROUP, auth=auth, connect_retries=retry['connect_retries'])
    transport = _NoRetryOnTimeout()
    for scheme in ('http://', 'https://'):
        session.session.mount(scheme, transport)
    return ks_loading.load_adapter_from_conf_options(
        conf, GROUP, session=session, auth=auth, **retry)


class PlacementClient:
    """Thin, typed Placement REST client.

    ``get``/``post``/``put``/``delete`` return the decoded JSON body (or
    None for an empty one) of a 2xx answer and raise a typed error for
    anything else.  :attr:`writes` counts the write requests sent.

    :param abort: an Event that, once set, cuts generation-conflict retry
        waits short (the agent sets it at SIGTERM so it exits at once).
    :param adapter: a keystoneauth adapter for Placement already made (the
        ``openstack gpu`` commands: from clouds.yaml through osc-lib's
        session, with :func:`retry_arguments`); default: built from the
        ``[placement]`` options.
    """

    def __init__(self, conf, abort: threading.Event | None = None,
                 adapter=None):
        self.conf = conf
        self._adapter = adapter or _load_adapter(conf)
        self.abort = abort or threading.Event()
        self.writes = 0
        self.last_request_id: str | None = None
        self._rand = random.Random()

    # -- plain verbs ------------------------------------------------------

    def get(self, path: str, version: str = BASE_VERSION) -> Any:
        return self.request('GET', path, version=version)

    def post(self, path: str, body: Any = None,
             version: str = BASE_VERSION) -> Any:
        return self.request('POST', path, body, version=version)

    def put(self, path: str, body: Any = None,
            version: str = BASE_VERSION) -> Any:
        return self.request('PUT', path, body, version=version)

    def delete(self, path: str, version: str = BASE_VERSION) -> Any:
        return self.request('DELETE', path, version=version)

    @property
    def endpoint(self) -> str:
        try:
            return self._adapter.get_endpoint() or '?'
        except ks_exc.ClientException:
            return '?'

    def _unavailable(self, method, path, exc) -> Exception:
        """The typed error of a request that got no answer from Placement.

        Says whether Keystone (no token yet) or Placement failed, and names
        the timeout option when nothing answered in time.
        """
        auth = self._adapter.auth
        auth_url = getattr(auth, 'auth_url', None)
        timed_out = (_timed_out(exc) or
                     isinstance(exc, ks_exc.ConnectTimeout))
        reason = str(exc)
        if timed_out:
            reason = 'no answer within %s seconds ([placement] timeout)' % (
                self.conf.placement.timeout)
        if auth_url and getattr(auth, 'auth_ref', None) is None:
            error = exception.IdentityUnavailable(auth_url=auth_url,
                                                  reason=reason)
        elif timed_out:
            error = exception.PlacementTimeout(
                endpoint=self.endpoint, method=method, url=path,
                timeout=self.conf.placement.timeout)
        else:
            # ConnectionError, EndpointNotFound, DiscoveryFailure, or
            # another refusal (e.g. Keystone refused our credentials)
            error = exception.PlacementUnavailable(endpoint=self.endpoint,
                                                   reason=reason)
        return error

    def request(self, method: str, path: str, body: Any = None,
                version: str = BASE_VERSION) -> Any:
        """One request; keystoneauth retries connection errors and 5xx.

        :raises PlacementUnavailable: still failing after
            :func:`retry_arguments`' retries (a timeout at once).
        :raises PlacementAPIError: a 4xx answer (``kwargs['code']`` holds
            Placement's error code).
        :raises PlacementInvalidResponse: a 2xx answer that is not JSON.
        """
        kwargs = {'microversion': version, 'raise_exc': False,
                  'headers': {'Accept': 'application/json'}}
        if body is not None:
            kwargs['json'] = body
        if method != 'GET':
            self.writes += 1
        try:
            resp = self._adapter.request(path, method, **kwargs)
        except ks_exc.ClientException as exc:
            raise self._unavailable(method, path, exc)
        request_id = resp.headers.get('openstack-request-id')
        self.last_request_id = request_id
        if resp.status_code >= 500:
            raise exception.PlacementUnavailable(
                endpoint=self.endpoint,
                reason='%s %s answered %d (request id %s): %s' % (
                    method, path, resp.status_code, request_id,
                    excerpt(resp.text)))
        if resp.status_code >= 400:
            code, detail = _parse_error(resp)
            cls = exception.PlacementAPIError
            raise cls(status=resp.status_code, method=method, url=path,
                      request_id=request_id, detail=detail, code=code)
        if not resp.content:
            return None
        try:
            return resp.json()
        except ValueError:
            raise exception.PlacementInvalidResponse(
                status=resp.status_code, method=method, url=path,
                request_id=request_id, detail=excerpt(resp.text))

    # -- generation-checked writes ----------------------------------------

    def write_generation_checked(
            self, method: str, path: str,
            build: Callable[[], Any | None],
            version: str = BASE_VERSION) -> Any:
        """Write the body ``build()`` returns; re-build and retry on 409.

        ``build`` reads what it needs (the provider's generation included)
        and returns the body, or None when nothing needs writing any more
        (another writer did it, or it no longer applies).  On 409
        ``placement.concurrent_update`` the write is retried after a short
        jittered wait, at most ``[placement] max_conflict_retries`` times.

        :returns: the answer's body, or None when nothing was written.
        :raises PlacementConflict: still conflicting after the retries.
        """
        retries = self.conf.placement.max_conflict_retries
        attempt = 0
        while True:
            body = build()
            if body is None:
                return None
            try:
                return self.request(method, path, body, version=version)
            except exception.PlacementAPIError as exc:
                if error_code(exc) != CONCURRENT_UPDATE:
                    raise
                if attempt >= retries:
                    raise exception.PlacementConflict(
                        status=409, method=method, url=path,
                        request_id=exc.kwargs.get('request_id'),
                        retries=retries, detail=exc.kwargs.get('detail'),
                        code=CONCURRENT_UPDATE)
                backoff = self.conf.placement.retry_backoff
                if backoff is None:
                    backoff = _CONFLICT_BACKOFF
                delay = self._rand.uniform(
                    0.0, 0.1 * (attempt + 1)) * min(1.0, backoff * 2)
                LOG.info('Placement generation conflict on %(method)s '
                         '%(path)s (request id %(rid)s); re-reading, retry '
                         '%(n)d of %(max)d', {
                             'method': method, 'path': path, 'n': attempt + 1,
                             'rid': exc.kwargs.get('request_id'),
                             'max': retries})
                if self.abort.wait(delay):
                    raise
                attempt += 1


def _parse_error(resp) -> tuple[str | None, str]:
    try:
        errors = resp.json().get('errors') or []
        first = errors[0]
        return first.get('code'), first.get('detail') or first.get('title')
    except (ValueError, AttributeError, IndexError, TypeError):
        return None, excerpt(resp.text)
