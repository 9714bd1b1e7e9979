"""Single sign-on per organization (OpenID Connect) and its sign-in policy (docs/sso.md).

An owner sets the provider (issuer, client id, write-only client secret, scopes), the email
domains it signs in and the role a person signing in for the first time joins with
(`configure_sso`), and the policy (`set_policy`): SSO required (but for break-glass
owners), two-factor required, idle and absolute session limits. Both are changes, audited.

A sign-in (`start_sign_in`, `finish_sign_in`) is the authorization code flow with PKCE
(S256), a `state` bound to the browser and used once, and a `nonce`; the ID token is
checked against the issuer's JWKS (fetched again once when a token names a key it does not
hold: the provider rotated its keys), its issuer, audience, nonce and times. The provider
is reached through Authlib's client, each address checked against the SSRF rule first. A
session it opens keeps the provider's refresh token; `recheck_session` asks the provider
again every few minutes, and a refusal ends the session.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import secrets
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Annotated, Any

import httpx
from authlib.common.security import generate_token
from authlib.integrations.httpx_client import AsyncOAuth2Client
from joserfc import jwt
from joserfc.errors import InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet
from joserfc.jwt import JWTClaimsRegistry
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from core.destinations.ssrf import ResolutionFailed, TargetRefused, pin, system_resolver
from core.owner.audit import AuditEntry, record
from core.owner.changes import Acting, Change, Origin
from core.owner.dashboard_sessions import SSO_RECHECK
from core.owner.roles import Actor
from core.platform.db import Conn
from core.platform.errors import (
    DomainTaken,
    InvalidInput,
    NotFound,
    SsoRefused,
    SsoRequired,
    Unavailable,
)
from core.platform.ids import new_id
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.platform.services import Registry, Services
from core.platform.vocabulary import Role

CALLBACK_PATH = "/app/sso/callback"
ATTEMPT_LIFETIME = timedelta(minutes=10)
# Discovery documents and key sets are kept this long (a key set is fetched again at once
# when a token names a key it does not hold).
_KEPT_SECONDS = 3600.0
_TIMEOUT = 5.0
_LEEWAY_SECONDS = 60
_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"]
_DOMAIN = re.compile(r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
DEFAULT_SCOPES = "openid email profile offline_access"


class SsoSettings(BaseModel):
    """What `PUT /v1/organization/sso` and the organization page set."""

    model_config = ConfigDict(extra="forbid")

    issuer: Annotated[str, StringConstraints(min_length=8, max_length=2000)] = Field(
        description="the provider's issuer URL; `{issuer}/.well-known/openid-configuration` "
        "must answer"
    )
    client_id: Annotated[str, StringConstraints(min_length=1, max_length=500)]
    client_secret: Annotated[str, StringConstraints(min_length=1, max_length=2000)] | None = Field(
        default=None, description="write-only; omitted on a change keeps the stored one"
    )
    allowed_domains: list[str] = Field(
        min_length=1, max_length=20, description="the email domains whose people it signs in"
    )
    default_role: Role = Field(
        default="viewer", description="the role of a person signing in for the first time"
    )
    scopes: Annotated[str, StringConstraints(min_length=6, max_length=500)] = DEFAULT_SCOPES

    @field_validator("allowed_domains")
    @classmethod
    def _domains(cls, value: list[str]) -> list[str]:
        domains = list(dict.fromkeys(domain.strip().lower() for domain in value))
        for domain in domains:
            if not _DOMAIN.fullmatch(domain):
                raise ValueError("each domain is a DNS name such as example.com")
        return domains

    @field_validator("scopes")
    @classmethod
    def _scopes(cls, value: str) -> str:
        words = value.split()
        if "openid" not in words or not all(
            re.fullmatch(r"[\x21\x23-\x5b\x5d-\x7e]+", w) for w in words
        ):
            raise ValueError("space-separated scopes including openid")
        return " ".join(words)


class SsoPolicy(BaseModel):
    """What `PUT /v1/organization/policy` and the organization page set."""

    model_config = ConfigDict(extra="forbid")

    sso_required: bool = Field(
        default=False,
        description="password and link sign-in refused for members (but break-glass owners)",
    )
    two_factor_required: bool = Field(
        default=False,
        description="members signing in with a password set up TOTP before anything else",
    )
    session_idle_minutes: int | None = Field(
        default=None, ge=5, le=720, description="a session idle this long ends (default 720)"
    )
    session_absolute_hours: int | None = Field(
        default=None, ge=1, le=720, description="a session this old ends, however active"
    )
    break_glass: list[str] = Field(
        default_factory=list,
        max_length=10,
        description="owners (member ids) who may still sign in with a password",
    )


# --- the owner's settings ----------------------------------------------------------------


@scoped
async def get_sso(conn: Conn, scope: OrgScope) -> dict[str, Any] | None:
    """The organization's single sign-on (never its client secret); None when none."""
    cur = await conn.execute(queries["get_sso"], {"organization_id": scope.organization_id})
    return await cur.fetchone()


async def configure_sso(
    change: Change, settings: SsoSettings, *, allow_private: bool, now: datetime
) -> dict[str, Any]:
    """Set the organization's single sign-on (`sso.updated`); a domain another organization
    holds is `409 domain_taken`, nothing stored."""
    try:
        await pin(settings.issuer, resolver=system_resolver, allow_private=allow_private)
    except (TargetRefused, ResolutionFailed) as exc:
        raise InvalidInput(
            "the issuer cannot be reached safely", [{"field": "issuer", "message": str(exc)}]
        ) from None
    org = {"organization_id": change.scope.organization_id}
    async with change as conn:
        await conn.execute(
            queries["upsert_sso"],
            {
                **org,
                "issuer": settings.issuer.rstrip("/"),
                "client_id": settings.client_id,
                "client_secret": settings.client_secret,
                "scopes": settings.scopes,
                "default_role": settings.default_role,
                "now": now,
            },
        )
        await conn.execute(queries["clear_sso_domains"], org)
        for domain in settings.allowed_domains:
            cur = await conn.execute(queries["insert_sso_domain"], {**org, "domain": domain})
            if await cur.fetchone() is None:
                raise DomainTaken(f"{domain} signs in to another organization")
        row = await get_sso(conn, change.scope)
        assert row is not None
        return row


async def remove_sso(change: Change) -> None:
    """Turn single sign-on off (`sso.removed`), and the policy requiring it; none set up
    is no change, recorded all the same."""
    async with change as conn:
        await conn.execute(queries["delete_sso"], {"organization_id": change.scope.organization_id})


@scoped
async def get_policy(conn: Conn, scope: OrgScope) -> dict[str, Any]:
    """The organization's sign-in policy."""
    row = await (
        await conn.execute(queries["get_policy"], {"organization_id": scope.organization_id})
    ).fetchone()
    assert row is not None
    row.pop("has_sso")
    return row


async def set_policy(change: Change, policy: SsoPolicy) -> dict[str, Any]:
    """Set the organization's sign-in policy (`organization.policy_updated`). SSO required
    without SSO set up, or a break-glass member who is not an owner, is `422`."""
    org = {"organization_id": change.scope.organization_id}
    async with change as conn:
        current = await (await conn.execute(queries["get_policy"], org)).fetchone()
        assert current is not None
        if policy.sso_required and not current["has_sso"]:
            raise InvalidInput(
                "set up single sign-on before requiring it",
                [{"field": "sso_required", "message": "no single sign-on yet"}],
            )
        await conn.execute(queries["update_policy"], {**org, **policy.model_dump()})
        cur = await conn.execute(queries["set_break_glass"], {**org, "members": policy.break_glass})
        marked = {row["member_id"] for row in await cur.fetchall() if row["break_glass"]}
        if marked != set(policy.break_glass):
            raise InvalidInput(
                "only owners can be break-glass",
                [{"field": "break_glass", "message": "each an owner's member id"}],
            )
        return await get_policy(conn, change.scope)


async def session_organization(conn: Conn, member_id: str, organization_id: str) -> str:
    """Where a member signing in with a password or a link opens their session:
    `organization_id` unless it requires single sign-on (but for its break-glass owners),
    else the first of theirs that does not; none is `403 sso_required`."""
    cur = await conn.execute(
        queries["sso_session_organization"],
        {"member_id": member_id, "organization_id": organization_id},
    )
    row = await cur.fetchone()
    if row is None:
        raise SsoRequired("your organization signs you in with single sign-on (SSO) only")
    return str(row["id"])


# --- the provider ------------------------------------------------------------------------


@dataclass(slots=True)
class _Kept:
    """A provider's discovery document and key set, and when each was fetched."""

    metadata: dict[str, Any]
    fetched: float
    keys: KeySet | None = None
    keys_fetched: float = 0.0


@dataclass(slots=True)
class Providers:
    """What this process keeps of the providers it talked to, by issuer."""

    kept: dict[str, _Kept] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


PROVIDERS: Registry[Providers] = Registry("sso providers", Providers)


async def _get_json(services: Services, url: str) -> dict[str, Any]:
    """A JSON document from the provider, its address checked first."""
    allow_private = services.settings.allow_private_targets
    try:
        await pin(url, resolver=system_resolver, allow_private=allow_private)
        async with httpx.AsyncClient(timeout=_TIMEOUT, follow_redirects=False) as client:
            answer = await client.get(url, headers={"Accept": "application/json"})
        answer.raise_for_status()
        document = answer.json()
    except (TargetRefused, ResolutionFailed, httpx.HTTPError, ValueError) as exc:
        raise Unavailable(f"the SSO provider did not answer ({type(exc).__name__})") from None
    if not isinstance(document, dict):
        raise Unavailable("the SSO provider answered no JSON object")
    return document


async def _provider(services: Services, issuer: str) -> _Kept:
    providers = services.state(PROVIDERS)
    kept = providers.kept.get(issuer)
    if kept is None or time.monotonic() - kept.fetched > _KEPT_SECONDS:
        metadata = await _get_json(services, f"{issuer}/.well-known/openid-configuration")
        if metadata.get("issuer") != issuer:
            raise SsoRefused("the provider's discovery names another issuer")
        kept = _Kept(metadata, time.monotonic())
        providers.kept[issuer] = kept
    return kept


async def _keys(services: Services, kept: _Kept, *, again: bool) -> KeySet:
    if kept.keys is None or again or time.monotonic() - kept.keys_fetched > _KEPT_SECONDS:
        document = await _get_json(services, str(kept.metadata.get("jwks_uri", "")))
        try:
            kept.keys = KeySet.import_key_set(document)  # type: ignore[arg-type]
        except (JoseError, ValueError, TypeError, KeyError):
            raise SsoRefused("the provider's key set is malformed") from None
        kept.keys_fetched = time.monotonic()
    return kept.keys


def _client(sso: dict[str, Any], redirect_uri: str, *, scoped: bool = True) -> AsyncOAuth2Client:
    """Authlib's client for the organization's provider (a refresh asks for no scope: the
    grant's own, as the provider kept it)."""
    return AsyncOAuth2Client(
        client_id=sso["client_id"],
        client_secret=sso["client_secret"],
        scope=sso["scopes"] if scoped else None,
        redirect_uri=redirect_uri,
        code_challenge_method="S256",
        token_endpoint_auth_method="client_secret_post" if sso["client_secret"] else "none",
        timeout=_TIMEOUT,
        follow_redirects=False,
    )


def redirect_uri(services: Services) -> str:
    """The address providers send the browser back to (registered with each provider)."""
    return services.settings.public_url.rstrip("/") + CALLBACK_PATH


def _state_hash(state: str) -> bytes:
    return hashlib.sha256(state.encode()).digest()


def email_domain(email: str) -> str:
    return email.rpartition("@")[2].strip().lower()


@dataclass(frozen=True, slots=True)
class Started:
    """Where to send the browser, and the state its cookie binds."""

    url: str
    state: str


async def start_sign_in(
    services: Services, email: str, *, redirect_uri: str, now: datetime
) -> Started:
    """Find the organization by the email's domain and send the person to its provider."""
    email = email.strip()[:320]
    async with services.db.connection() as conn:
        sso = await (
            await conn.execute(queries["sso_for_domain"], {"domain": email_domain(email)})
        ).fetchone()
    if sso is None or "@" not in email:
        raise NotFound("no organization signs in this address's domain with SSO")
    kept = await _provider(services, sso["issuer"])
    state, nonce, verifier = generate_token(43), generate_token(43), generate_token(64)
    async with services.db.connection() as conn:
        await conn.execute(
            queries["insert_sso_attempt"],
            {
                "state_hash": _state_hash(state),
                "organization_id": sso["organization_id"],
                "nonce": nonce,
                "code_verifier": verifier,
                "expires_at": now + ATTEMPT_LIFETIME,
            },
        )
    async with _client(sso, redirect_uri) as client:
        url, _ = client.create_authorization_url(
            str(kept.metadata.get("authorization_endpoint", "")),
            state=state,
            code_verifier=verifier,
            nonce=nonce,
            login_hint=email,
        )
    return Started(url, state)


async def verify_id_token(
    services: Services, sso: dict[str, Any], id_token: str, *, nonce: str, now: datetime
) -> dict[str, Any]:
    """The ID token's claims once its signature (the issuer's keys, fetched again once for
    a key not held), issuer, audience, authorized party, nonce and times are right;
    anything else is SsoRefused."""
    kept = await _provider(services, sso["issuer"])
    token = None
    for again in (False, True):
        keys = await _keys(services, kept, again=again)
        try:
            token = jwt.decode(id_token, keys, algorithms=_ALGORITHMS)
            break
        except InvalidKeyIdError:  # a key not held: the provider may have rotated its keys
            if again:
                raise SsoRefused("the ID token's signature is not the provider's") from None
        except (JoseError, ValueError):
            raise SsoRefused("the ID token's signature is not the provider's") from None
    assert token is not None
    registry = JWTClaimsRegistry(
        now=int(now.timestamp()),
        leeway=_LEEWAY_SECONDS,
        iss={"essential": True, "value": sso["issuer"]},
        aud={"essential": True, "value": sso["client_id"]},
        sub={"essential": True},
        exp={"essential": True},
        iat={"essential": True},
        nonce={"essential": True, "value": nonce},
    )
    claims: dict[str, Any] = dict(token.claims)
    try:
        registry.validate(claims)
    except JoseError as exc:
        raise SsoRefused(f"the ID token is not valid here ({exc.error})") from None
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    if len(audiences) > 1 and claims.get("azp") != sso["client_id"]:
        raise SsoRefused("the ID token was issued to another client")
    return claims


async def _userinfo(
    services: Services, kept: _Kept, tokens: dict[str, Any], subject: str
) -> dict[str, Any]:
    """The address claims from the provider's userinfo endpoint, for providers that keep
    them out of the ID token (a code flow that also issues an access token, as Okta and
    oidc-provider do); its subject must be the ID token's."""
    url = str(kept.metadata.get("userinfo_endpoint", ""))
    access = tokens.get("access_token")
    if not url or not isinstance(access, str):
        return {}
    try:
        await pin(url, resolver=system_resolver,
                  allow_private=services.settings.allow_private_targets)  # fmt: skip
        async with httpx.AsyncClient(timeout=_TIMEOUT, follow_redirects=False) as client:
            answer = await client.get(url, headers={"Authorization": f"Bearer {access}"})
        answer.raise_for_status()
        info = answer.json()
    except (TargetRefused, ResolutionFailed, httpx.HTTPError, ValueError):
        raise SsoRefused("the provider's userinfo did not answer") from None
    if not isinstance(info, dict) or info.get("sub") != subject:
        raise SsoRefused("the provider's userinfo is another person's")
    return {name: info[name] for name in ("email", "email_verified") if name in info}


@dataclass(frozen=True, slots=True)
class SignedIn:
    """A person the provider signed in: the member, the organization, the refresh token."""

    member_id: str
    organization_id: str
    refresh_token: str | None


async def _refused(conn: Conn, organization_id: str, origin: Origin, reason: str, who: str) -> None:
    """Record a refused single sign-on in the organization's trail (subject: why)."""
    entry = AuditEntry("member", "", who, "sso.sign_in_refused", reason, origin.via,
                       origin.ip, origin.user_agent)  # fmt: skip
    async with conn.transaction():
        await record(conn, OrgScope(organization_id), entry)


async def finish_sign_in(
    services: Services,
    *,
    state: str,
    cookie_state: str,
    code: str,
    redirect_uri: str,
    origin: Origin,
    now: datetime,
) -> SignedIn:
    """The provider's answer: the state bound to this browser and used once, the code
    exchanged with the PKCE verifier, the ID token checked, the address's domain allowed;
    then the member (made, and joined with the default role, the first time) signed in,
    `member.signed_in` recorded. Anything wrong is SsoRefused (recorded as
    `sso.sign_in_refused` once the organization is known)."""
    if not state or not cookie_state or not secrets.compare_digest(state, cookie_state):
        raise SsoRefused("this sign-in was not started in this browser")
    async with services.db.connection() as conn:
        attempt = await (
            await conn.execute(queries["take_sso_attempt"], {"state_hash": _state_hash(state)})
        ).fetchone()
    if attempt is None or attempt["expires_at"] <= now:
        raise SsoRefused("this sign-in was used or has expired; start again")
    organization_id = attempt["organization_id"]
    async with services.db.connection() as conn:
        sso = await (
            await conn.execute(queries["sso_of_organization"], {"organization_id": organization_id})
        ).fetchone()
    if sso is None:
        raise SsoRefused("single sign-on was turned off")
    try:
        kept = await _provider(services, sso["issuer"])
        token_url = str(kept.metadata.get("token_endpoint", ""))
        await pin(token_url, resolver=system_resolver,
                  allow_private=services.settings.allow_private_targets)  # fmt: skip
        async with _client(sso, redirect_uri) as client:
            tokens = await client.fetch_token(
                token_url, code=code[:2000], code_verifier=attempt["code_verifier"]
            )
        id_token = tokens.get("id_token")
        if not isinstance(id_token, str):
            raise SsoRefused("the provider sent no ID token")
        claims = await verify_id_token(services, sso, id_token, nonce=attempt["nonce"], now=now)
        if "email" not in claims:
            claims = {**claims, **await _userinfo(services, kept, tokens, claims["sub"])}
    except SsoRefused as exc:
        async with services.db.connection() as conn:
            await _refused(conn, organization_id, origin, "invalid_token", "")
        raise exc from None
    except Exception as exc:  # the provider refused the code, or answered nothing usable
        async with services.db.connection() as conn:
            await _refused(conn, organization_id, origin, "provider_refused", "")
        raise SsoRefused(f"the provider refused the sign-in ({type(exc).__name__})") from None
    email = claims.get("email")
    if (
        not isinstance(email, str)
        or claims.get("email_verified") is False
        or email_domain(email) not in sso["allowed_domains"]
    ):
        async with services.db.connection() as conn:
            await _refused(conn, organization_id, origin, "domain_not_allowed", str(email)[:320])
        raise SsoRefused("this address's domain does not sign in to the organization")
    member_id = await _join(services, sso, email.strip()[:320], origin)
    refresh = tokens.get("refresh_token")
    return SignedIn(member_id, organization_id, refresh if isinstance(refresh, str) else None)


async def _join(services: Services, sso: dict[str, Any], email: str, origin: Origin) -> str:
    """The member with this address, made and joined with the default role the first
    time (`member.joined`), and `member.signed_in` recorded."""
    scope = OrgScope(sso["organization_id"])
    async with services.db.transaction() as conn:
        made = await (
            await conn.execute(
                queries["insert_member"],
                {"id": new_id("mem"), "email": email, "password_hash": None},
            )
        ).fetchone()
        member = (
            made
            or await (await conn.execute(queries["member_by_email"], {"email": email})).fetchone()
        )
        assert member is not None
        member_id = str(member["id"])
        joined = await (
            await conn.execute(
                queries["insert_membership"],
                {
                    "organization_id": scope.organization_id,
                    "member_id": member_id,
                    "role": sso["default_role"],
                },
            )
        ).fetchone()
        acting = Acting(scope, Actor("member", member_id, email, sso["default_role"]), origin)
        if joined is not None:
            await acting.record(conn, "member.joined", member_id)
        await acting.record(conn, "member.signed_in", member_id)
    return member_id


async def recheck_session(services: Services, session_id: str, *, now: datetime) -> bool:
    """Ask the provider again, with the session's refresh token, whether the person may
    still sign in, when it is due; False (the session ended) when it says no. A provider
    that does not answer leaves the session as it is until the next check."""
    async with services.db.connection() as conn:
        due = await (
            await conn.execute(
                queries["sso_sessions_due"], {"id": session_id, "due": now - SSO_RECHECK}
            )
        ).fetchone()
        if due is None:
            return True
        sso = await (
            await conn.execute(
                queries["sso_of_organization"], {"organization_id": due["sso_organization_id"]}
            )
        ).fetchone()
    if sso is None:
        refused = True
        refresh = None
    else:
        try:
            kept = await _provider(services, sso["issuer"])
            token_url = str(kept.metadata.get("token_endpoint", ""))
            await pin(token_url, resolver=system_resolver,
                      allow_private=services.settings.allow_private_targets)  # fmt: skip
            async with _client(sso, "", scoped=False) as client:
                tokens = await client.refresh_token(
                    token_url, refresh_token=due["sso_refresh_token"]
                )
        except (Unavailable, TargetRefused, ResolutionFailed, httpx.HTTPError):
            return True
        except Exception:  # the provider's OAuth error: invalid_grant, the person disabled
            refused, refresh = True, None
        else:
            refused = False
            refresh = tokens.get("refresh_token") or due["sso_refresh_token"]
    async with services.db.connection() as conn:
        if refused:
            await conn.execute(queries["end_session_by_id"], {"id": session_id})
            return False
        await conn.execute(
            queries["sso_session_checked"],
            {"id": session_id, "now": now, "refresh_token": refresh},
        )
    return True


async def prune_attempts(conn: Conn, *, now: datetime) -> int:
    """Forget sign-ins never completed (the sessions pass); how many."""
    cur = await conn.execute(queries["prune_sso_attempts"], {"now": now})
    return cur.rowcount
