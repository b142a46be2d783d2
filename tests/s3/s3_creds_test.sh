#!/bin/sh
# The AWS credential chain against s3rver: `pinio load s3://...` byte-exact
# (--sha256) with keys from web identity (environment and profile: STS
# AssumeRoleWithWebIdentity), an assumed role (role_arn + source_profile:
# AssumeRole signed with the source's keys, or with credential_source's: the
# container endpoint's or IMDS's), credential_process, SSO (an sso_session
# and the legacy start URL: GetRoleCredentials with the cached token), the
# container endpoint (full URI, token file) and IMDSv2 (the token checked),
# all served by credserver.py handing out s3rver's keys; credentials that
# expire within the refresh window fetched again during the load, long-lived
# ones once; a configured source that fails (STS 403, a malformed answer, a
# missing token file, a process exiting 1, a refused container token, a
# container host not allowed, a credential_source with no keys or of a name
# botocore does not take, an expired or refused SSO token) an error naming
# the source; an sso_session's token near or past its expiry refreshed at SSO
# OIDC (the cache rewritten, the new token used; a refused refresh keeps a
# token still valid, else the error says why; the legacy form never
# refreshed); no instance metadata (nothing listening, or a server that
# never answers: one try) anonymous; no token ever printed.
# usage: s3_creds_test.sh PINIO SRC_ROOT
[ "${1:-}" = --help ] && { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
PINIO=$1
SRC=$2
. "$SRC/tests/s3/s3env.sh"
s3_test s3creds models
"$PINIO" gen "$DIR/one.safetensors" --size 4M --seed 3 >/dev/null || exit 1
s3_put models one.safetensors "$DIR/one.safetensors" || exit 1
SUM=$(sha256sum "$DIR/one.safetensors" | cut -d' ' -f1)
URL=s3://models/one.safetensors
printf 'pinio-test-web-identity-token' >"$DIR/web.token"  # as Kubernetes writes it: no line break
printf 'a-wrong-token-NeverPrint\n' >"$DIR/wrong.token"

# Every credential variable unset: each case sets its own.
creds_clear() {
    unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE AWS_ROLE_ARN \
        AWS_WEB_IDENTITY_TOKEN_FILE AWS_ROLE_SESSION_NAME AWS_ENDPOINT_URL_STS \
        AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_AUTHORIZATION_TOKEN \
        AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE AWS_EC2_METADATA_SERVICE_ENDPOINT
    export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
    export AWS_EC2_METADATA_DISABLED=true
}
# No session token, web identity token or secret in anything printed.
no_secret() {
    if grep -q -e NeverPrint -e pinio-test-web-identity-token "$DIR/out" "$DIR/err"; then
        echo "FAIL: $1: a secret printed:"; cat "$DIR/out" "$DIR/err"; fails=$((fails + 1))
    fi
}
load_ok() {
    check 0 "$1: load" "$PINIO" load "$URL" --sha256 "$SUM"
    has "$DIR/out" "sha256    $SUM  $URL" "$1: byte-exact"
    no_secret "$1"
}
load_fails() {
    check 1 "$1: load must fail" "$PINIO" load "$URL"
    has "$DIR/err" "$2" "$1: the error names the source"
    no_secret "$1"
}
sts_start() { cred_start "$@"; export AWS_ENDPOINT_URL_STS=$CRED_URL; }
# boto_same NAME WANT: botocore (Debian's python3-botocore) resolves WANT
# ("METHOD KEY SECRET-DIGEST TOKEN-DIGEST", botocore_check.py --creds) from
# the same environment; skipped, saying so, where botocore is missing.
hash16() { printf %s "$1" | sha256sum | cut -c1-16; }
SRV="S3RVER $(hash16 S3RVER) $(hash16 pinio-test-session-NeverPrint)"
boto_same() {
    got=$(/usr/bin/python3 "$SRC/tests/s3/botocore_check.py" --creds 2>&1)
    rc=$?
    [ $rc -eq 77 ] && { echo "note: $1: botocore not installed, not cross-checked"; return; }
    [ "$got" = "$2" ] || { echo "FAIL: $1: botocore resolves '$got', want '$2'"; fails=$((fails + 1)); }
}
log_count() { grep -c -- "$1" "$DIR/cred.log"; }

# --- web identity from the environment ------------------------------------
creds_clear
cred_start
export AWS_ENDPOINT_URL_STS=$CRED_URL AWS_ROLE_ARN=arn:aws:iam::123456789012:role/pinio-test
export AWS_WEB_IDENTITY_TOKEN_FILE=$DIR/web.token AWS_ROLE_SESSION_NAME=pinio-ci
load_ok "web identity"
[ "$(log_count 'Action=AssumeRoleWithWebIdentity RoleArn=arn:aws:iam::123456789012:role/pinio-test RoleSessionName=pinio-ci')" -eq 1 ] ||
    { echo "FAIL: web identity: not one AssumeRoleWithWebIdentity with the role and session name:"; cat "$DIR/cred.log"; fails=$((fails + 1)); }
boto_same "web identity" "assume-role-with-web-identity $SRV"
# pinio doctor s3://: the source, the key id's last 4 characters, region,
# endpoint and the object's HEAD; never a secret.
check 0 "doctor" "$PINIO" doctor "$URL"
has "$DIR/out" "^credentials  web identity (AWS_WEB_IDENTITY_TOKEN_FILE=$DIR/web.token)$" "doctor: the source"
has "$DIR/out" "^key id       \.\.\.RVER (expires 20" "doctor: the key id's end and the expiry"
has "$DIR/out" "^region       us-east-1$" "doctor: the region"
has "$DIR/out" "^endpoint     http://127.0.0.1:$S3_PORT (addressing auto)$" "doctor: the endpoint"
has "$DIR/out" "^object HEAD  $(wc -c <"$DIR/one.safetensors") bytes, ETag \"" "doctor: the HEAD"
has "$DIR/out" "^verdict      reachable$" "doctor: reachable"
no_secret "doctor"
grep -q S3RVER "$DIR/out" && { echo "FAIL: doctor prints the whole key id"; fails=$((fails + 1)); }
check 1 "doctor, a missing object" "$PINIO" doctor s3://models/nope
has "$DIR/out" "^object HEAD  FAILED: s3://models/nope: no such object" "doctor: the HEAD's failure"
has "$DIR/out" "^verdict      not reachable$" "doctor: not reachable"
# The data requests are signed with the keys fetched: keys s3rver does not
# know are refused (s3rver serves unsigned requests, so a byte-exact load
# alone would not tell).
sts_start --keys AKIDUNKNOWN unknown-secret
check 1 "web identity, keys s3rver does not know" "$PINIO" load "$URL"
has "$DIR/err" "403" "web identity: the requests signed with the fetched keys"
# Credentials within the 15-minute window are fetched again before a request.
sts_start --expire-in 300
load_ok "web identity, expiring"
n=$(log_count AssumeRoleWithWebIdentity)
[ "$n" -ge 2 ] || { echo "FAIL: expiring credentials fetched $n times, want a refresh"; fails=$((fails + 1)); }
# Failures name the source.
sts_start --fail 403 InvalidIdentityToken
load_fails "STS 403" "web identity (AWS_WEB_IDENTITY_TOKEN_FILE=$DIR/web.token): STS AssumeRoleWithWebIdentity answered HTTP 403 InvalidIdentityToken"
check 1 "doctor, STS 403" "$PINIO" doctor "$URL"
has "$DIR/out" "^credentials  FAILED: web identity (AWS_WEB_IDENTITY_TOKEN_FILE=$DIR/web.token): STS AssumeRoleWithWebIdentity answered HTTP 403 InvalidIdentityToken" "doctor: the failing source"
sts_start --malformed
load_fails "STS malformed" "web identity (AWS_WEB_IDENTITY_TOKEN_FILE=$DIR/web.token): a malformed answer"
sts_start
export AWS_WEB_IDENTITY_TOKEN_FILE=$DIR/wrong.token
load_fails "wrong web token" "answered HTTP 400 InvalidIdentityToken"
export AWS_WEB_IDENTITY_TOKEN_FILE=$DIR/missing.token
load_fails "missing token file" "web identity (AWS_WEB_IDENTITY_TOKEN_FILE=$DIR/missing.token): cannot read the token file"
unset AWS_ROLE_ARN
export AWS_WEB_IDENTITY_TOKEN_FILE=$DIR/web.token
load_fails "no role" "no role to assume"

# --- profiles: web_identity_token_file, role_arn + source_profile, process --
creds_clear
cred_start
export AWS_ENDPOINT_URL_STS=$CRED_URL AWS_CONFIG_FILE=$DIR/config AWS_PROFILE=wi
cat >"$DIR/proc.sh" <<EOF
#!/bin/sh
[ "\$1" = "--exit" ] && { echo "no credentials for \$2" >&2; exit 1; }
echo '{"Version": 1, "AccessKeyId": "S3RVER", "SecretAccessKey": "S3RVER", "SessionToken": "tok-NeverPrint", "Expiration": "2099-01-01T00:00:00Z"}'
EOF
chmod +x "$DIR/proc.sh"
cat >"$DIR/config" <<EOF
[profile wi]
role_arn = arn:aws:iam::123456789012:role/from-profile
web_identity_token_file = $DIR/web.token
role_session_name = profile-session
[profile base]
aws_access_key_id = AKIDBASE
aws_secret_access_key = base-secret-NeverPrint
[profile ar]
role_arn = arn:aws:iam::123456789012:role/assumed
source_profile = base
[profile proc]
credential_process = "$DIR/proc.sh" --ok
[profile procfail]
credential_process = $DIR/proc.sh --exit 'two words'
EOF
load_ok "profile web identity"
has "$DIR/cred.log" "RoleArn=arn:aws:iam::123456789012:role/from-profile RoleSessionName=profile-session" "the profile's role and session"
boto_same "profile web identity" "assume-role-with-web-identity $SRV"
export AWS_PROFILE=ar
# The AssumeRole call's signature is botocore's for the same request.
sts_start --verify-secret base-secret-NeverPrint
load_ok "assume role"
has "$DIR/cred.log" "Action=AssumeRole RoleArn=arn:aws:iam::123456789012:role/assumed .*Credential=AKIDBASE/[0-9]*/us-east-1/sts/aws4_request" "AssumeRole signed with the source profile's key"
boto_same "assume role" "assume-role $SRV"
sts_start --verify-secret another-secret
load_fails "assume role, a signature STS does not take" "assume role ($DIR/config \[ar\] role_arn=arn:aws:iam::123456789012:role/assumed, source_profile base): STS AssumeRole answered HTTP 403 SignatureDoesNotMatch"
export AWS_PROFILE=proc
load_ok "credential_process"
boto_same "credential_process" "custom-process S3RVER $(hash16 S3RVER) $(hash16 tok-NeverPrint)"
export AWS_PROFILE=procfail
load_fails "credential_process exits 1" "credential_process ($DIR/config \[procfail\]): credential_process exited with status 1: no credentials for two words"

# --- role_arn + credential_source (botocore's canonical names) ---------------
# The role's AssumeRole is signed with the keys the named source hands out
# (credserver.py's S3RVER keys and session token, the signature checked
# against botocore's).
creds_clear
cred_start --verify-secret S3RVER
export AWS_ENDPOINT_URL_STS=$CRED_URL AWS_CONFIG_FILE=$DIR/config
cat >"$DIR/config" <<EOF
[profile ecs]
role_arn = arn:aws:iam::123456789012:role/from-ecs
credential_source = EcsContainer
[profile ec2]
role_arn = arn:aws:iam::123456789012:role/from-ec2
credential_source = Ec2InstanceMetadata
[profile envsrc]
role_arn = arn:aws:iam::123456789012:role/from-env
credential_source = Environment
[profile bogus]
role_arn = arn:aws:iam::123456789012:role/bogus
credential_source = ec2instancemetadata
[profile both]
role_arn = arn:aws:iam::123456789012:role/both
credential_source = Environment
source_profile = ecs
EOF
export AWS_PROFILE=ecs AWS_CONTAINER_CREDENTIALS_FULL_URI=$CRED_URL/container/creds
load_ok "credential_source EcsContainer"
has "$DIR/cred.log" "^GET /container/creds " "EcsContainer: the container endpoint asked"
has "$DIR/cred.log" "Action=AssumeRole RoleArn=arn:aws:iam::123456789012:role/from-ecs .*Credential=S3RVER/[0-9]*/us-east-1/sts/aws4_request" "EcsContainer: AssumeRole signed with the container's keys"
boto_same "credential_source EcsContainer" "assume-role $SRV"
unset AWS_CONTAINER_CREDENTIALS_FULL_URI
load_fails "credential_source EcsContainer, no container" "$DIR/config: \[ecs\] credential_source EcsContainer: no credentials found there"
boto_same "credential_source EcsContainer, no container" "error CredentialRetrievalError"
export AWS_PROFILE=ec2 AWS_EC2_METADATA_SERVICE_ENDPOINT=$CRED_URL
unset AWS_EC2_METADATA_DISABLED
: >"$DIR/cred.log"
load_ok "credential_source Ec2InstanceMetadata"
has "$DIR/cred.log" "^PUT /latest/api/token ttl=21600" "Ec2InstanceMetadata: IMDSv2's token"
has "$DIR/cred.log" "Action=AssumeRole RoleArn=arn:aws:iam::123456789012:role/from-ec2 .*Credential=S3RVER/" "Ec2InstanceMetadata: AssumeRole signed with the instance's keys"
boto_same "credential_source Ec2InstanceMetadata" "assume-role $SRV"
export AWS_EC2_METADATA_DISABLED=true
load_fails "credential_source Ec2InstanceMetadata, IMDS off" "\[ec2\] credential_source Ec2InstanceMetadata: no credentials found there"
# Environment: keys in the environment come first in the chain (botocore's
# too), so the role is reached only without them: an error, not anonymous.
export AWS_PROFILE=envsrc
load_fails "credential_source Environment, no keys" "\[envsrc\] credential_source Environment: no credentials found there"
boto_same "credential_source Environment, no keys" "error CredentialRetrievalError"
export AWS_PROFILE=bogus
load_fails "credential_source unknown" "\[bogus\] credential_source is not Environment, EcsContainer or Ec2InstanceMetadata"
boto_same "credential_source unknown" "error InvalidConfigError"
export AWS_PROFILE=both
load_fails "credential_source and source_profile" "\[both\] has role_arn but both source_profile and credential_source"
boto_same "credential_source and source_profile" "error InvalidConfigError"

# --- SSO (IAM Identity Center): the AWS CLI's cached token --------------------
# GetRoleCredentials at AWS_ENDPOINT_URL_SSO (credserver.py) with the token
# `aws sso login` cached in ~/.aws/sso/cache/SHA1(session name or start
# URL).json; an expired token, one the portal refuses (401), a missing
# cache and a half SSO profile are errors saying what to do; never the token.
creds_clear
sso_start() { cred_start "$@"; export AWS_ENDPOINT_URL_SSO=$CRED_URL AWS_ENDPOINT_URL_SSO_OIDC=$CRED_URL; }
sso_start
OLD_HOME=$HOME
export HOME=$DIR/home AWS_CONFIG_FILE=$DIR/config
mkdir -p "$HOME/.aws/sso/cache"
sha1() { printf %s "$1" | sha1sum | cut -d' ' -f1; }
SSO_URL=https://pinio-test.awsapps.com/start
sso_cache() {  # sso_cache KEY TOKEN EXPIRES-AT
    printf '{"startUrl": "%s", "region": "us-east-1", "accessToken": "%s", "expiresAt": "%s", "clientId": "x"}\n' \
        "$SSO_URL" "$2" "$3" >"$HOME/.aws/sso/cache/$(sha1 "$1").json"
}
cat >"$DIR/config" <<EOF
[profile sso]
sso_session = pinio-sso
sso_account_id = 123456789012
sso_role_name = ReadModels
[sso-session pinio-sso]
sso_start_url = $SSO_URL
sso_region = us-east-1
[profile ssolegacy]
sso_start_url = $SSO_URL
sso_region = eu-west-1
sso_account_id = 210987654321
sso_role_name = Legacy
[profile ssohalf]
sso_account_id = 123456789012
sso_role_name = ReadModels
[profile ssoclash]
sso_session = pinio-sso
sso_region = us-west-2
sso_account_id = 123456789012
sso_role_name = ReadModels
EOF
sso_cache pinio-sso pinio-sso-access-NeverPrint 2099-01-01T00:00:00Z
export AWS_PROFILE=sso
load_ok "SSO session"
has "$DIR/cred.log" "^GET /federation/credentials?role_name=ReadModels&account_id=123456789012 .*sso=ok" "SSO: GetRoleCredentials with the cached token"
boto_same "SSO session" "sso $SRV"
check 0 "doctor, SSO" "$PINIO" doctor "$URL"
has "$DIR/out" "^credentials  SSO ($DIR/config \[sso\] sso_session pinio-sso, role ReadModels in account 123456789012)$" "doctor: the SSO source"
no_secret "doctor, SSO"
export AWS_PROFILE=ssolegacy
sso_cache "$SSO_URL" pinio-sso-access-NeverPrint 2099-01-01T00:00:00UTC
load_ok "SSO legacy start URL"
has "$DIR/cred.log" "^GET /federation/credentials?role_name=Legacy&account_id=210987654321 .*sso=ok" "SSO legacy: the start URL's cached token"
boto_same "SSO legacy start URL" "sso $SRV"
export AWS_PROFILE=sso
sso_start --expire-in 300
load_ok "SSO, expiring credentials"
n=$(log_count /federation/credentials)
[ "$n" -ge 2 ] || { echo "FAIL: expiring SSO credentials fetched $n times, want a refresh"; fails=$((fails + 1)); }
sso_start --malformed
load_fails "SSO, malformed answer" "SSO ($DIR/config \[sso\] sso_session pinio-sso, role ReadModels in account 123456789012): a malformed answer from GetRoleCredentials (no accessKeyId, secretAccessKey and sessionToken strings)"
sso_start
sso_cache pinio-sso pinio-sso-access-NeverPrint 2020-01-01T00:00:00Z
load_fails "SSO, expired token" "SSO ($DIR/config \[sso\] sso_session pinio-sso, role ReadModels in account 123456789012): the SSO token cached in $HOME/.aws/sso/cache/$(sha1 pinio-sso).json expired at 2020-01-01T00:00:00Z and was not refreshed (the cached token has no refreshToken, clientSecret, registrationExpiresAt to refresh it with): run \`aws sso login\`"
boto_same "SSO, expired token" "error TokenRetrievalError"
[ -s "$DIR/cred.log" ] && { echo "FAIL: an expired SSO token was sent:"; cat "$DIR/cred.log"; fails=$((fails + 1)); }
sso_cache pinio-sso wrong-NeverPrint 2099-01-01T00:00:00Z
load_fails "SSO, token refused" "GetRoleCredentials answered HTTP 401: the SSO session has expired or is not valid: run \`aws sso login\`"
boto_same "SSO, token refused" "error UnauthorizedSSOTokenError"
rm -f "$HOME/.aws/sso/cache/$(sha1 pinio-sso).json"
load_fails "SSO, no cached token" "no cached SSO token $HOME/.aws/sso/cache/$(sha1 pinio-sso).json: run \`aws sso login\`"
export AWS_PROFILE=ssohalf
load_fails "SSO, half a profile" "\[ssohalf\] is configured for SSO but has no sso_start_url, sso_region"
boto_same "SSO, half a profile" "error InvalidConfigError"
export AWS_PROFILE=ssoclash
load_fails "SSO, profile and session differ" "\[ssoclash\] sso_region differs from \[sso-session pinio-sso\]'s"
boto_same "SSO, profile and session differ" "error InvalidConfigError"

# --- SSO token refresh (botocore's SSOTokenProvider) --------------------------
# An sso_session's cached token within 15 minutes of its expiry (or past it)
# with the refreshToken, clientId, clientSecret and registrationExpiresAt
# `aws sso login` caches beside it: exchanged at SSO OIDC's CreateToken
# (AWS_ENDPOINT_URL_SSO_OIDC; credserver.py checks the JSON body), the cache
# file replaced (mode 0600, botocore's members in its order), then
# GetRoleCredentials with the NEW token (credserver.py refuses the stale
# one). A refresh refused (400, 500): a token still valid is used, an
# expired one is the error naming the profile and the refusal. A legacy
# sso_start_url profile is never refreshed (nor by botocore). botocore 1.29
# refreshes the same cache at the same endpoint (botocore_check.py passes
# AWS_ENDPOINT_URL_SSO_OIDC on to it): it must resolve the same keys and
# write the same file but for expiresAt (a clock read apart).
SSO_CACHE=$HOME/.aws/sso/cache/$(sha1 pinio-sso).json
at() { date -u -d "@$(($(date +%s) + $1))" +%Y-%m-%dT%H:%M:%SZ; }
sso_refreshable() {  # sso_refreshable FILE TOKEN EXPIRES-AT [REGISTRATION-EXPIRES-AT]
    printf '{"startUrl": "%s", "region": "us-east-1", "accessToken": "%s", "expiresAt": "%s", "clientId": "pinio-sso-client", "clientSecret": "pinio-sso-client-secret-NeverPrint", "registrationExpiresAt": "%s", "refreshToken": "pinio-sso-refresh-NeverPrint"}\n' \
        "$SSO_URL" "$2" "$3" "${4:-2099-01-01T00:00:00Z}" >"$1"
    chmod 644 "$1"
}
# cache_refreshed WHAT [BOTOCORE-FILE]: $SSO_CACHE holds the refreshed token
# as botocore writes it (and as BOTOCORE-FILE, botocore's, but expiresAt);
# names the members that differ, never their values.
cache_refreshed() {
    /usr/bin/python3 - "$SSO_CACHE" "$SSO_URL" "${2:-}" <<'EOF' ||
import datetime, json, sys
d = json.load(open(sys.argv[1]))
want = {"startUrl": sys.argv[2], "region": "us-east-1", "accessToken": "pinio-sso-access-NeverPrint",
        "clientId": "pinio-sso-client", "clientSecret": "pinio-sso-client-secret-NeverPrint",
        "registrationExpiresAt": "2099-01-01T00:00:00Z", "refreshToken": "pinio-sso-refresh2-NeverPrint"}
order = ["startUrl", "region", "accessToken", "expiresAt", "clientId", "clientSecret",
         "registrationExpiresAt", "refreshToken"]
bad = [k for k in want if d.get(k) != want[k]]
if list(d) != order:
    bad.append("the members or their order: " + ",".join(d))
exp = datetime.datetime.strptime(d.get("expiresAt", ""), "%Y-%m-%dT%H:%M:%SZ")
if exp < datetime.datetime.utcnow() + datetime.timedelta(hours=1):
    bad.append("expiresAt not expiresIn ahead")
if sys.argv[3]:
    b = json.load(open(sys.argv[3]))
    bad += [f"{k} differs from botocore's" for k in set(b) | set(d) if k != "expiresAt" and b.get(k) != d.get(k)]
    if list(b) != list(d):
        bad.append("the member order differs from botocore's")
if bad:
    print("; ".join(bad))
    sys.exit(1)
EOF
        { echo "FAIL: $1: the rewritten cache file"; fails=$((fails + 1)); }
}
export AWS_PROFILE=sso
sso_start
sso_refreshable "$SSO_CACHE" pinio-sso-stale-NeverPrint "$(at 300)"
load_ok "SSO refresh, token within the window"
has "$DIR/cred.log" "^POST /token ctype=application/json body=ok$" "SSO refresh: CreateToken with the cached refresh token and client"
has "$DIR/cred.log" "^GET /federation/credentials?role_name=ReadModels&account_id=123456789012 .*sso=ok" "SSO refresh: GetRoleCredentials with the new token"
grep -q "sso=wrong" "$DIR/cred.log" && { echo "FAIL: SSO refresh: the stale token was sent"; fails=$((fails + 1)); }
[ "$(stat -c %a "$SSO_CACHE")" = 600 ] || { echo "FAIL: SSO refresh: the cache file's mode is $(stat -c %a "$SSO_CACHE"), want 600"; fails=$((fails + 1)); }
cp "$SSO_CACHE" "$DIR/pinio-refreshed.json"
ls -a "$HOME/.aws/sso/cache" | grep -q '\.json\.' && { echo "FAIL: SSO refresh: a temporary file left in the cache"; fails=$((fails + 1)); }
# The next load finds the refreshed token: no second CreateToken.
load_ok "SSO refresh, the refreshed token reused"
[ "$(log_count 'POST /token')" -eq 1 ] || { echo "FAIL: SSO refresh: the refreshed token refreshed again:"; cat "$DIR/cred.log"; fails=$((fails + 1)); }
if /usr/bin/python3 -c 'import botocore' 2>/dev/null; then
    sso_refreshable "$SSO_CACHE" pinio-sso-stale-NeverPrint "$(at 300)"
    : >"$DIR/cred.log"
    boto_same "SSO refresh" "sso $SRV"
    has "$DIR/cred.log" "^POST /token ctype=application/json body=ok$" "SSO refresh: botocore's CreateToken, the same body"
    cp "$SSO_CACHE" "$DIR/boto-refreshed.json"
    cp "$DIR/pinio-refreshed.json" "$SSO_CACHE"
    cache_refreshed "SSO refresh" "$DIR/boto-refreshed.json"
else
    echo "note: SSO refresh: botocore not installed, not cross-checked"
    cache_refreshed "SSO refresh"
fi
sso_start
sso_refreshable "$SSO_CACHE" pinio-sso-stale-NeverPrint 2020-01-01T00:00:00Z
load_ok "SSO refresh, an expired token"
has "$DIR/cred.log" "^POST /token ctype=application/json body=ok$" "SSO refresh, expired: CreateToken"
cache_refreshed "SSO refresh, expired"
for code in 400 500; do
    sso_start --oidc-fail $code
    sso_refreshable "$SSO_CACHE" pinio-sso-stale-NeverPrint 2020-01-01T00:00:00Z
    cp "$SSO_CACHE" "$DIR/before.json"
    load_fails "SSO refresh answered $code, expired" "SSO ($DIR/config \[sso\] sso_session pinio-sso, role ReadModels in account 123456789012): the SSO token cached in $SSO_CACHE expired at 2020-01-01T00:00:00Z and was not refreshed (SSO OIDC CreateToken at $CRED_URL answered HTTP $code server_error): run \`aws sso login\` with this profile"
    cmp -s "$SSO_CACHE" "$DIR/before.json" || { echo "FAIL: SSO refresh answered $code: the cache file changed"; fails=$((fails + 1)); }
    grep -q "^GET /federation" "$DIR/cred.log" && { echo "FAIL: SSO refresh answered $code: an expired token was sent"; fails=$((fails + 1)); }
    # A token with 14 minutes left: still good, used as it is.
    sso_refreshable "$SSO_CACHE" pinio-sso-access-NeverPrint "$(at 840)"
    : >"$DIR/cred.log"
    load_ok "SSO refresh answered $code, the token still valid"
    has "$DIR/cred.log" "^POST /token " "SSO refresh answered $code, still valid: the refresh tried"
    has "$DIR/cred.log" "^GET /federation/credentials?.*sso=ok" "SSO refresh answered $code, still valid: the cached token used"
done
# botocore retries a 500 (with a backoff of seconds): cross-checked on 400 only.
sso_start --oidc-fail 400
sso_refreshable "$SSO_CACHE" pinio-sso-stale-NeverPrint 2020-01-01T00:00:00Z
boto_same "SSO refresh answered 400, expired" "error TokenRetrievalError"
sso_refreshable "$SSO_CACHE" pinio-sso-access-NeverPrint "$(at 840)"
boto_same "SSO refresh answered 400, the token still valid" "sso $SRV"
# A refresh the portal's OIDC does not take (another refresh token): the error says so.
sso_start
sso_refreshable "$SSO_CACHE" pinio-sso-stale-NeverPrint 2020-01-01T00:00:00Z
sed -i 's/pinio-sso-refresh-NeverPrint/revoked-NeverPrint/' "$SSO_CACHE"
load_fails "SSO refresh token refused" "expired at 2020-01-01T00:00:00Z and was not refreshed (SSO OIDC CreateToken at $CRED_URL answered HTTP 400 invalid_grant): run \`aws sso login\`"
has "$DIR/cred.log" "^POST /token ctype=application/json body=wrong$" "SSO refresh token refused: CreateToken asked"
# A client registration past its time: not refreshed, not asked (botocore neither).
sso_start
sso_refreshable "$SSO_CACHE" pinio-sso-stale-NeverPrint 2020-01-01T00:00:00Z 2020-01-02T00:00:00Z
load_fails "SSO refresh, registration expired" "expired at 2020-01-01T00:00:00Z and was not refreshed (its client registration expired at 2020-01-02T00:00:00Z): run \`aws sso login\`"
[ -s "$DIR/cred.log" ] && { echo "FAIL: SSO refresh, registration expired: a request sent:"; cat "$DIR/cred.log"; fails=$((fails + 1)); }
boto_same "SSO refresh, registration expired" "error TokenRetrievalError"
# The legacy sso_start_url form: no refresh, its error as before.
export AWS_PROFILE=ssolegacy
LEGACY_CACHE=$HOME/.aws/sso/cache/$(sha1 "$SSO_URL").json
sso_start
sso_refreshable "$LEGACY_CACHE" pinio-sso-access-NeverPrint "$(at 300)"
load_ok "SSO legacy within the window"
boto_same "SSO legacy within the window" "sso $SRV"
sso_refreshable "$LEGACY_CACHE" pinio-sso-access-NeverPrint 2020-01-01T00:00:00Z
load_fails "SSO legacy expired" "the SSO token cached in $LEGACY_CACHE expired at 2020-01-01T00:00:00Z: run \`aws sso login\`"
grep -q "^POST /token" "$DIR/cred.log" && { echo "FAIL: SSO legacy: a refresh asked:"; cat "$DIR/cred.log"; fails=$((fails + 1)); }
export HOME=$OLD_HOME
unset AWS_ENDPOINT_URL_SSO AWS_ENDPOINT_URL_SSO_OIDC

# --- the container endpoint -------------------------------------------------
creds_clear
printf 'container-auth-NeverPrint\n' >"$DIR/auth.token"
cred_start --container-auth container-auth-NeverPrint
export AWS_CONTAINER_CREDENTIALS_FULL_URI=$CRED_URL/container/creds
export AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=$DIR/auth.token
load_ok "container, token file"
has "$DIR/cred.log" "GET /container/creds .*auth=ok" "the token file's token sent"
unset AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE
export AWS_CONTAINER_AUTHORIZATION_TOKEN=container-auth-NeverPrint
load_ok "container, token"
boto_same "container" "container-role $SRV"
export AWS_CONTAINER_AUTHORIZATION_TOKEN=wrong-NeverPrint
load_fails "container, wrong token" "container credentials (AWS_CONTAINER_CREDENTIALS_FULL_URI=$CRED_URL/container/creds): the endpoint answered HTTP 401"
export AWS_CONTAINER_CREDENTIALS_FULL_URI=http://192.0.2.1/creds
load_fails "container, a host not allowed" "an http:// URI must name 169.254.170.2, 169.254.170.23"

# --- IMDSv2 ---------------------------------------------------------------
creds_clear
unset AWS_EC2_METADATA_DISABLED
cred_start
export AWS_EC2_METADATA_SERVICE_ENDPOINT=$CRED_URL
load_ok "IMDSv2"
has "$DIR/cred.log" "PUT /latest/api/token ttl=21600" "the token PUT with its TTL"
has "$DIR/cred.log" "GET /latest/meta-data/iam/security-credentials/pinio-test-role token=ok" "the credentials read with the token"
boto_same "IMDSv2" "iam-role $SRV"
# Nothing listening: anonymous at once (s3rver serves anonymous requests).
cred_stop
load_ok "no IMDS"
check 0 "doctor, anonymous" "$PINIO" doctor "$URL"
has "$DIR/out" "^credentials  none: anonymous (unsigned requests)$" "doctor: anonymous said"
boto_same "no IMDS" "none"
# A metadata endpoint that never answers: one try (1 s), then anonymous.
cred_start --hang
export AWS_EC2_METADATA_SERVICE_ENDPOINT=$CRED_URL
load_ok "IMDS that never answers"
[ "$(wc -l <"$DIR/cred.log")" -eq 1 ] || { echo "FAIL: a silent IMDS: want one request:"; cat "$DIR/cred.log"; fails=$((fails + 1)); }
cred_stop

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
