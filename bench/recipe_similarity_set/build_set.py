# ruff: noqa: E501  (the pairs are data: long lines read better whole)
"""Writes dev.json and heldout.json for the recipe/prompt similarity set.

Each recipe is a TASK line plus hand-written prompts. Every prompt carries a
label code:
  P  easy positive  - near paraphrase of the same task on the same target
  H  hard positive  - very different wording, same task, same target
  S  hard negative  - same symbol/file/target, different task
  T  hard negative  - same kind of task, different target (recipe specifics would mislead)
  U  negative       - unrelated question from the same domain
The optional third element of a prompt tuple is extra detail for the note.
Run: python3 build_set.py
"""

import json
import os

NOTE = {
    "P": (True, "reworded"),
    "H": (True, "hard positive: very different wording, same task and target"),
    "S": (False, "hard negative: same target, different task"),
    "T": (False, "hard negative: same task type, different target; recipe specifics would mislead"),
    "U": (False, "unrelated: general question in the same domain"),
}

DEV = [
    (
        "Find where a function is defined and list every place that calls it (function: parse_config).",
        [
            ("who calls parse_config and where does it live?", "P"),
            ("i need every caller of parse_config before I change its signature, also where's it defined", "H"),
            ("rename parse_config to load_config everywhere", "S", "rename, not a lookup"),
            (
                "find the definition and callers of validate_schema",
                "T",
                "different function; the recipe's file locations and call sites are parse_config's",
            ),
            (
                "what does parse_config return when the file is missing?",
                "S",
                "behaviour question about the same function",
            ),
            ("difference between yaml.safe_load and yaml.load?", "U"),
        ],
    ),
    (
        "Run the test suite with pytest and report the first failing test and its error (repo: invoicer).",
        [
            ("run the tests and tell me what fails", "P"),
            ("pytest is red on my branch, what's broken?", "H"),
            ("run teh test suite, whats failing", "P", "typo"),
            ("add a test for the early-payment discount calculation", "S", "writing a test, not running the suite"),
            ("why does pytest take 40 seconds just to collect?", "S", "performance of the test run, not the failures"),
            (
                "make the test suite run in parallel with pytest-xdist",
                "S",
                "changing how tests run, not reading the failure",
            ),
        ],
    ),
    (
        "Fix the bug that makes test_totals_with_discount fail in tests/test_invoice.py (rounding in compute_total).",
        [
            ("test_totals_with_discount is failing again, can you fix it", "P"),
            ("compute_total rounds wrong and the discount test breaks - patch it", "H"),
            (
                "fix failing test test_login_redirect in tests/test_auth.py",
                "T",
                "different failing test in another module; the cause (rounding in compute_total) does not transfer",
            ),
            ("write a new test for compute_total with an empty invoice", "S", "adding a test, not fixing one"),
            ("how does rounding work with Python's Decimal?", "U"),
        ],
    ),
    (
        "Add the function slugify(title) to utils/text.py so that tests/test_text.py::test_slugify passes.",
        [
            ("implement slugify, the test for it is already there", "P"),
            (
                "tests/test_text.py imports a helper that doesn't exist yet, the url-slug one. write it so the test goes green",
                "H",
            ),
            (
                "add truncate_words so test_truncate_words passes",
                "T",
                "different missing function with different expected behaviour",
            ),
            ("slugify turns 'a  b' into 'a--b', why?", "S", "debugging the existing function, not adding it"),
            ("what's a good regex for url-safe strings", "U"),
        ],
    ),
    (
        "Rename the class UserRecord to Account across all modules and update the imports.",
        [
            ("rename UserRecord -> Account everywhere", "P"),
            (
                "UserRecord is a terrible name. call it Account throughout the codebase and fix whatever imports break",
                "H",
            ),
            (
                "rename OrderRecord to Order across the code",
                "T",
                "different class; the list of files and imports to touch is different",
            ),
            ("where is UserRecord defined and who uses it?", "S", "lookup, not rename"),
            ("what does PEP 8 say about class names?", "U"),
        ],
    ),
    (
        "Explain what the module billing/scheduler.py does and how its main loop decides when to send invoices.",
        [
            ("how does the billing scheduler work?", "P"),
            ("walk me through scheduler.py in billing - when does it actually fire off an invoice", "H"),
            ("explain what billing/exporter.py does", "T", "different module"),
            ("add a --dry-run option to the billing scheduler", "S", "feature work on the same module"),
            ("what is a cron expression", "U"),
        ],
    ),
    (
        "Find the configured database connection timeout (DB_TIMEOUT) and where its default value is set.",
        [
            ("what's the db timeout set to?", "P"),
            ("how long do we wait on postgres before giving up on a connection, and where is that configured", "H"),
            ("find the configured redis cache TTL", "T", "different setting, lives elsewhere"),
            ("write a test that DB_TIMEOUT is read from the environment", "S", "writing a test about the setting"),
            ("what's psycopg2's default connect timeout?", "U", "library question, not this repo's config"),
        ],
    ),
    (
        "Count the TODO and FIXME comments in the repository and list them by file.",
        [
            ("how many TODOs do we have?", "P"),
            ("give me all the fixme/todo notes people left in the code, grouped per file", "H"),
            ("resolve the TODO in payments/refund.py", "S", "acting on one TODO, not inventorying them"),
            ("count lines of code per module", "T", "different thing to count"),
            ("is there a convention for TODO vs FIXME vs XXX?", "U"),
        ],
    ),
    (
        "List all HTTP endpoints defined in the Flask app (routes under api/) with their methods.",
        [
            ("what endpoints does the api expose?", "P"),
            ("make me a table of every route and whether it's GET/POST/etc", "H"),
            ("add a /health endpoint", "S", "adding a route, not listing"),
            ("list all the CLI commands defined in manage.py", "T", "different thing to list"),
            ("whats the difference between PUT and PATCH", "U"),
        ],
    ),
    (
        "Find which version of requests the project pins and which installed packages depend on it.",
        [
            ("what requests version are we on and what needs it?", "P"),
            ("is requests pinned anywhere? and what drags it in as a dependency", "H"),
            ("upgrade requests to 2.32", "S", "upgrade, not inspection"),
            (
                "which version of urllib3 do we pin",
                "T",
                "different package; the recipe's answer (version, dependents) is specific to requests",
            ),
            ("what does pip-compile do?", "U"),
        ],
    ),
    (
        "Find the commit that introduced the retry logic in http/client.py and who authored it.",
        [
            ("when was retry added to the http client and by whom", "P"),
            ("git archaeology: whose idea was the retry loop in client.py, which commit?", "H"),
            ("revert the commit that added retries to the http client", "S", "reverting, not finding"),
            (
                "find the commit that changed the log format in logging_setup.py",
                "T",
                "different file and change; different commit",
            ),
            ("how do I squash my last 3 commits", "U"),
        ],
    ),
    (
        "Set up a virtualenv, install dependencies from requirements-dev.txt, and run the app locally with flask run (repo: recipebox).",
        [
            ("how do I get this running locally?", "P"),
            ("fresh clone here. what do i need to do to see the site on localhost", "H"),
            ("dockerize the app", "S", "containerising, not local setup"),
            ("deploy recipebox to heroku", "S", "deployment, not local run"),
            ("venv vs virtualenv, which one should I use", "U"),
        ],
    ),
    (
        "Write a docstring for the function merge_intervals in geometry/intervals.py describing its arguments, return value and edge cases.",
        [
            ("add a docstring to merge_intervals", "P"),
            ("merge_intervals has zero documentation, please explain in the code what it takes and gives back", "H"),
            (
                "write docstrings for every public function in geometry/",
                "T",
                "much wider scope; the recipe covers one function",
            ),
            ("merge_intervals is slow on big inputs, optimize it", "S", "optimisation of the same function"),
            ("what docstring style does numpy use", "U"),
        ],
    ),
    (
        "Add a --verbose flag to the CLI in cli/main.py that sets logging to DEBUG.",
        [
            ("add a verbose option to the cli", "P"),
            ("I want a -v switch on the command line that turns on debug logs", "H"),
            (
                "add a --format json flag to the cli",
                "T",
                "different flag with different wiring (output formatting, not logging)",
            ),
            ("why does the cli print nothing even when I pass --verbose", "S", "debugging the flag after it exists"),
            ("what does store_true do in argparse", "U"),
        ],
    ),
    (
        "Find where the HTTP handler HandleUpload is defined and list the routes that register it (Go service: filevault).",
        [
            ("where's HandleUpload and which routes use it", "P"),
            ("which mux paths end up in the upload handler? and where's that func", "H"),
            ("add a 50MB size limit to HandleUpload", "S", "changing the handler, not locating it"),
            ("where is HandleDownload defined and what routes hit it", "T", "different handler"),
            ("difference between http.Handler and http.HandlerFunc?", "U"),
        ],
    ),
    (
        "Run the Jest tests for the cart component (src/components/Cart.test.js) and report which assertions fail.",
        [
            ("run the cart tests, what's failing", "P"),
            ("npx jest Cart -- which expects break?", "H"),
            ("run the jest tests for Checkout.test.js", "T", "different test file; the failures reported are Cart's"),
            ("convert Cart.test.js to React Testing Library", "S", "rewriting the tests"),
            ("jest vs vitest?", "U"),
        ],
    ),
    (
        "Fix the data race in cache/lru.go reported by go test -race ./cache/...",
        [
            ("go test -race complains about lru.go, fix it", "P"),
            ("the LRU cache has a race condition, the race detector catches it in CI. sort it out", "H"),
            (
                "fix the data race in queue/worker.go",
                "T",
                "different race in different code; the fix (which lock, which field) does not transfer",
            ),
            ("add TTL expiry to the LRU cache", "S", "feature on the same file"),
            ("what is a mutex?", "U"),
        ],
    ),
    (
        "Find where the environment variable API_BASE_URL is read in the frontend and what value it falls back to.",
        [
            ("where does the frontend get API_BASE_URL from", "P"),
            ("what url does the web app call when nobody set the base url env var?", "H"),
            ("rename API_BASE_URL to VITE_API_URL", "S", "rename, not lookup"),
            ("where is SENTRY_DSN read in the frontend", "T", "different variable, different place"),
            ("how do env vars work in vite", "U"),
        ],
    ),
    (
        "Explain the flow of a request through the Express middleware stack in server/middleware/.",
        [
            ("how does the middleware chain work in our express server?", "P"),
            ("trace what happens to an incoming request before it reaches the route handlers", "H"),
            ("add rate limiting middleware", "S", "adding middleware, not explaining the chain"),
            ("explain the db migration setup in server/migrations", "T", "different subsystem to explain"),
            ("what's the difference between app.use and router.use", "U"),
        ],
    ),
    (
        "List all database models defined in models/ and the relationships between them (Django app: clinicq).",
        [
            ("what models do we have and how do they relate", "P"),
            ("give me an ER-diagram style overview of the django models, FKs and all", "H"),
            ("add a phone_number field to the Patient model", "S", "schema change, not overview"),
            ("list all celery tasks defined in the project", "T", "different thing to list"),
            ("when should I use OneToOneField vs ForeignKey(unique=True)", "U"),
        ],
    ),
    (
        "Find why make build fails with 'No rule to make target proto/gen' and fix the Makefile.",
        [
            ("make build broken: no rule to make target proto/gen", "P"),
            ("build blows up at the protobuf codegen step, sort out the makefile", "H"),
            ("add a make lint target", "S", "new target, not fixing the build"),
            ("make test fails with 'undefined: NewServer'", "T", "different failure with a different cause"),
            ("what does .PHONY do in a Makefile", "U"),
        ],
    ),
    (
        "Check whether the package lodash is still used anywhere in the JS code and remove it from package.json if not.",
        [
            ("is lodash still used? if not drop it", "P"),
            ("can we get rid of lodash or is something still importing it", "H"),
            ("upgrade lodash to 4.17.21 for the prototype pollution CVE", "S", "upgrade, not removal"),
            ("check whether moment is still used anywhere", "T", "different package; import sites differ"),
            ("lodash or ramda, which is nicer?", "U"),
        ],
    ),
    (
        "Show the git history of settings.py for the last month and summarize what changed.",
        [
            ("what changed in settings.py recently", "P"),
            ("summarize the last few weeks of commits that touched the django settings file", "H"),
            ("who last edited urls.py", "T", "different file and a narrower question"),
            ("restore settings.py to how it was a month ago", "S", "restoring, not summarising"),
            ("git log vs git reflog?", "U"),
        ],
    ),
    (
        "Add type hints to all functions in reports/aggregate.py and make mypy pass on that file.",
        [
            ("type-annotate reports/aggregate.py, mypy should be clean", "P"),
            ("mypy keeps yelling about aggregate.py, add the missing annotations", "H"),
            ("add type hints to reports/render.py", "T", "different file with different functions and types"),
            ("aggregate.py double counts refunds in the monthly totals", "S", "bug in the same file"),
            ("whats the difference between List and list in type hints", "U"),
        ],
    ),
    (
        "Generate a coverage report with pytest-cov and list the modules below 80% coverage.",
        [
            ("which modules have poor test coverage", "P"),
            ("run coverage and tell me what's under 80", "H"),
            ("increase coverage of utils/dates.py to 90%", "S", "writing tests, not reporting"),
            ("what's the difference between line and branch coverage", "U"),
            ("run pylint and list the modules with the most warnings", "T", "different tool and metric"),
        ],
    ),
    (
        "Find the SQL query behind the /reports/monthly endpoint and explain why it is slow (missing index on orders.created_at).",
        [
            ("the monthly report endpoint is slow, why?", "P"),
            ("/reports/monthly takes 12 seconds, what query does it run and what's wrong with it", "H"),
            ("add pagination to /reports/monthly", "S", "feature on the same endpoint"),
            ("why is /users/search slow", "T", "different endpoint and query; the missing index is specific"),
            ("how do I read EXPLAIN ANALYZE output", "U"),
        ],
    ),
    (
        "Add a unit test for parse_duration in utils/time.py covering '1h30m', '45s' and invalid input.",
        [
            ("write tests for parse_duration", "P"),
            ("parse_duration has no coverage at all, cover the normal cases and garbage input", "H"),
            ("parse_duration('90m') returns the wrong value, fix it", "S", "bug fix in the function"),
            ("add a unit test for format_bytes", "T", "different function with different cases"),
            ("pytest.mark.parametrize syntax?", "U"),
        ],
    ),
    (
        "Find all places that log user email addresses and replace them with a masked version (PII cleanup).",
        [
            ("we're logging emails in plain text, mask them", "P"),
            ("grep for log lines that leak user emails and redact them", "H"),
            ("add a log line when a user changes their email", "S", "adds logging instead of masking"),
            ("find all places that log credit card numbers and mask them", "T", "different data, different log sites"),
            ("what counts as personal data under GDPR", "U"),
        ],
    ),
    (
        "Upgrade the Go module github.com/spf13/cobra to v1.8 and fix the compile errors.",
        [
            ("bump cobra to 1.8", "P"),
            ("go get'ing the latest cobra broke the build, update it properly and fix the errors", "H"),
            ("which version of cobra are we using?", "S", "inspection, not upgrade"),
            ("upgrade viper to v1.18", "T", "different module; the API breakages differ"),
            ("how do go module replace directives work", "U"),
        ],
    ),
    (
        "Find which CI job runs the integration tests and what environment variables it sets (.github/workflows/ci.yml).",
        [
            ("where do integration tests run in CI", "P"),
            ("what env does the integration job in github actions get?", "H"),
            ("make the CI run on pull requests too", "S", "editing the workflow triggers"),
            ("which CI job builds the docker image and pushes it", "T", "different job"),
            ("how do github actions matrices work", "U"),
        ],
    ),
]

HELDOUT = [
    (
        "Find where the method Order.apply_coupon is defined and list all its call sites (repo: shopfront).",
        [
            ("where is apply_coupon and who calls it", "P"),
            ("before I touch the coupon logic on Order, what code paths end up invoking it?", "H"),
            ("apply_coupon lets expired coupons through, fix it", "S", "bug fix, not lookup"),
            ("list the call sites of Order.refund", "T", "different method"),
            ("explain the visitor pattern", "U"),
        ],
    ),
    (
        "Run go test ./... and report which packages fail and the first error in each (repo: ledgerd).",
        [
            ("run the go tests, what fails", "P"),
            ("whats red in go test rn", "H"),
            ("add a test for the ledger balance after a reversal", "S", "writing a test"),
            ("run npm test in the web/ folder and report failures", "T", "different test suite and toolchain"),
            ("what does t.Parallel() do", "U"),
        ],
    ),
    (
        "Fix test_export_csv_quotes in tests/test_export.py: export_csv does not quote fields that contain commas.",
        [
            ("test_export_csv_quotes fails, fix", "P"),
            ("our csv export breaks when a customer name has a comma in it; there's a test that shows it", "H"),
            (
                "fix test_import_xlsx_dates failing in tests/test_import.py",
                "T",
                "different failing test, different root cause",
            ),
            ("add a TSV option to export_csv", "S", "feature on the same function"),
            ("what does csv.QUOTE_MINIMAL mean", "U"),
        ],
    ),
    (
        "Implement is_business_day(date) in calendar_utils.py so that the existing tests in tests/test_calendar.py pass.",
        [
            ("tests want is_business_day, write it", "P"),
            (
                "test_calendar fails on import, the weekday/holiday check function it needs was never written. add it",
                "H",
            ),
            (
                "implement next_business_day so test_next_business_day passes",
                "T",
                "different function with different expected behaviour",
            ),
            ("is_business_day says Good Friday is a working day", "S", "bug in the function after it exists"),
            ("how does dateutil handle holidays", "U"),
        ],
    ),
    (
        "Rename the function fetch_user_data to get_user_profile in all files, including tests and docs.",
        [
            ("rename fetch_user_data to get_user_profile", "P"),
            (
                "fetch_user_data is a misleading name - change it to get_user_profile across the whole repo incl tests",
                "H",
            ),
            ("rename fetch_orders to list_orders", "T", "different function; the set of files differs"),
            ("fetch_user_data makes two db calls, merge them into one", "S", "refactor of the body, not a rename"),
            ("is there a tool that renames python symbols safely?", "U"),
        ],
    ),
    (
        "Explain how the authentication module auth/tokens.py issues and refreshes JWTs.",
        [
            ("how do our jwt tokens get refreshed?", "P"),
            ("I don't get the login token lifecycle - what does tokens.py in auth actually do", "H"),
            ("shorten the JWT expiry to 15 minutes", "S", "config change in the same module"),
            ("explain how auth/permissions.py checks roles", "T", "different module"),
            ("what is a JWT", "U"),
        ],
    ),
    (
        "Find the value of the Celery broker URL and where it is configured for production.",
        [
            ("what's the celery broker in prod", "P"),
            (
                "which redis or rabbit instance do the background workers talk to in production, and where is that set",
                "H",
            ),
            ("find where the sentry DSN is configured", "T", "different setting"),
            ("switch the celery broker from redis to rabbitmq", "S", "migration, not lookup"),
            ("celery vs rq?", "U"),
        ],
    ),
    (
        "List all Go packages in the module that have no test files.",
        [
            ("which packages have no tests", "P"),
            ("find go pkgs with no _test.go at all", "H"),
            ("list the exported functions in package ledger", "T", "different thing to list"),
            ("write tests for package ledger/fx", "S", "writing tests for one of them"),
            ("what's a table-driven test", "U"),
        ],
    ),
    (
        "Count the React components under src/components and list which ones are still class components.",
        [
            ("how many components do we have and which are still class-based", "P"),
            ("hunt down the leftover `extends React.Component` stuff in components, how much is there", "H"),
            ("convert the class components to hooks", "S", "migration, not inventory"),
            ("count the custom hooks under src/hooks", "T", "different thing to count"),
            ("are class components slower than function components?", "U"),
        ],
    ),
    (
        "Find out why npm install fails with an ERESOLVE peer dependency conflict on react@18 and resolve it.",
        [
            ("npm install errors with ERESOLVE, fix", "P"),
            ("cant install deps anymore, some peer dep fight with react 18", "H"),
            (
                "npm ci fails with 'lockfile out of sync with package.json'",
                "T",
                "different install error, different cause",
            ),
            ("upgrade react to 19", "S", "upgrade, not conflict resolution"),
            ("what does --legacy-peer-deps do", "U"),
        ],
    ),
    (
        "Find who last changed the function calculate_shipping and in which commit, using git blame and git log.",
        [
            ("who touched calculate_shipping last", "P"),
            ("which commit most recently modified the shipping cost function and who made it", "H"),
            ("calculate_shipping returns 0 for international orders", "S", "bug, not history"),
            ("who last changed apply_tax", "T", "different function, different commit"),
            ("how do I ignore formatting commits in git blame", "U"),
        ],
    ),
    (
        "Bring up the project with docker compose (api, postgres, redis) and run the database migrations.",
        [
            ("how do I start everything with docker", "P"),
            ("spin up the stack locally via compose and migrate the db", "H"),
            ("add a mailhog service to docker-compose.yml", "S", "editing compose, not bringing it up"),
            ("set up the project without docker, plain venv", "T", "different setup path"),
            ("docker compose vs docker-compose, what's the difference", "U"),
        ],
    ),
    (
        "Write a module-level docstring for ingest/pipeline.py summarizing the stages of the pipeline.",
        [
            ("document ingest/pipeline.py at the top of the file", "P"),
            ("pipeline.py needs a header comment explaining what each stage does", "H"),
            ("add a dedupe stage to the ingest pipeline", "S", "feature on the same module"),
            ("write a module docstring for ingest/sources.py", "T", "different module with different content"),
            ("are module docstrings shown by help()?", "U"),
        ],
    ),
    (
        "Add a --since DATE option to the report subcommand in the click CLI (cli.py) to filter entries.",
        [
            ("add --since to the report command", "P"),
            ("let people pass a start date to `report` so older entries get skipped", "H"),
            ("add an --until option to the export subcommand", "T", "different option on a different subcommand"),
            ("the report command crashes on an empty database", "S", "bug in the same command"),
            ("click vs typer?", "U"),
        ],
    ),
    (
        "Find where the Go interface Storage is defined and list all types that implement it.",
        [
            ("what implements Storage?", "P"),
            ("show me every concrete backend that satisfies the storage interface, and the interface itself", "H"),
            ("add a Delete method to the Storage interface", "S", "changing the interface"),
            ("what types implement Notifier", "T", "different interface"),
            ("how does Go know a type implements an interface", "U"),
        ],
    ),
    (
        "Run mypy on the whole package and summarize the type errors by module.",
        [
            ("run mypy, summarize", "P"),
            ("how bad is our typing? errors per file please", "H"),
            ("enable strict mode for mypy in pyproject.toml", "S", "configuring, not running"),
            ("run eslint and summarize the warnings", "T", "different tool and language"),
            ("what's a Protocol in typing", "U"),
        ],
    ),
    (
        "Fix the off-by-one error in paginate() in api/pagination.py that drops the last item of each page (test_paginate_last_page).",
        [
            ("paginate drops the last item, fix", "P"),
            ("test_paginate_last_page is failing, every page seems to be one row short", "H"),
            ("switch the api to cursor-based pagination", "S", "redesign, not the bug"),
            (
                "fix the off-by-one in chunk() in utils/batching.py",
                "T",
                "same kind of bug in a different function; the fix differs",
            ),
            ("limit/offset vs keyset pagination", "U"),
        ],
    ),
    (
        "Find where the frontend's Redux store is created and list the reducers combined into it.",
        [
            ("where's the redux store set up and what reducers does it have", "P"),
            ("what slices make up our global state?", "H"),
            ("migrate from redux to zustand", "S", "migration, not lookup"),
            ("where is the react-router config and which routes does it define", "T", "different structure to locate"),
            ("redux vs context api", "U"),
        ],
    ),
    (
        "Explain the retry and backoff policy used by the job queue worker in worker/queue.go.",
        [
            ("how does the worker retry failed jobs", "P"),
            ("what's the backoff when a job blows up in queue.go?", "H"),
            ("make the worker retry up to 10 times", "S", "changing the policy"),
            ("explain how the scheduler in worker/cron.go picks jobs", "T", "different file and mechanism"),
            ("what is exponential backoff with jitter", "U"),
        ],
    ),
    (
        "List every Django view that lacks authentication (no @login_required or permission class).",
        [
            ("which views are not behind login", "P"),
            ("security audit: endpoints w/o any auth decorator", "H"),
            ("add @login_required to the export view", "S", "fixing one view"),
            ("list the views that have no rate limiting", "T", "different property to audit"),
            ("session auth vs token auth in DRF", "U"),
        ],
    ),
    (
        "Find why the Docker image build fails at pip install with 'gcc: not found' and fix the Dockerfile.",
        [
            ("docker build fails gcc not found", "P"),
            ("image build dies while installing the python deps, some compiler is missing", "H"),
            ("shrink the docker image", "S", "optimisation of the same Dockerfile"),
            ("docker build fails at COPY: file not found", "T", "different build error"),
            ("alpine vs slim base images", "U"),
        ],
    ),
    (
        "Determine which packages in requirements.txt are not imported by the code and remove them.",
        [
            ("find unused deps in requirements.txt", "P"),
            ("prune requirements - anything in there we don't import anymore?", "H"),
            ("pin every requirement to an exact version", "S", "pinning, not pruning"),
            ("find unused npm packages in package.json", "T", "different ecosystem and tooling"),
            ("what's the difference between requirements.txt and pyproject dependencies", "U"),
        ],
    ),
    (
        "Find the commit that broke test_signup_email using git bisect.",
        [
            ("bisect to find when test_signup_email started failing", "P"),
            ("test_signup_email was green last week, which commit broke it?", "H"),
            ("fix test_signup_email", "S", "fixing, not finding the culprit commit"),
            (
                "git bisect the failure in test_password_reset",
                "T",
                "different test; the good/bad range and culprit differ",
            ),
            ("how does git bisect run work", "U"),
        ],
    ),
    (
        "Add input validation to the create_user endpoint in api/users.py so invalid emails return 400.",
        [
            ("create_user should 400 on bad emails", "P"),
            ("right now you can sign up with 'asdf' as your email. reject that with a bad request", "H"),
            ("add validation to the update_order endpoint", "T", "different endpoint and fields"),
            ("create_user is slow when the users table is big", "S", "performance of the same endpoint"),
            ("what's the RFC 5322 email regex", "U"),
        ],
    ),
    (
        "Profile the CSV import command (manage.py import_csv) with cProfile and identify the slowest function.",
        [
            ("why is import_csv slow, profile it", "P"),
            ("where's all the time going during the csv import?", "H"),
            ("add a progress bar to import_csv", "S", "feature on the same command"),
            ("profile the pdf export", "T", "different command with different hot spots"),
            ("cProfile vs py-spy", "U"),
        ],
    ),
    (
        "Add a GitHub Actions workflow that runs pytest on Python 3.10 to 3.12 for every pull request.",
        [
            ("set up CI to run the tests on PRs", "P"),
            ("gh actions: pytest matrix 3.10/3.11/3.12 on pull requests pls", "H"),
            ("add a release workflow that publishes to PyPI on tags", "T", "different workflow"),
            ("CI fails only on 3.12, why?", "S", "debugging CI, not creating it"),
            ("github actions vs gitlab ci", "U"),
        ],
    ),
    (
        "Find where feature flags are defined and list which ones are enabled in the production config.",
        [
            ("which feature flags are on in prod", "P"),
            ("where do we declare our toggles and what's switched on in production?", "H"),
            ("add a feature flag for the new checkout flow", "S", "adding a flag"),
            ("remove the old_search flag and its dead code", "S", "cleanup of one flag"),
            ("list which rate limits are configured in production", "T", "different settings to list"),
        ],
    ),
    (
        "Replace deprecated datetime.utcnow() calls with timezone-aware datetime.now(timezone.utc) across the codebase.",
        [
            ("get rid of utcnow everywhere", "P"),
            ("python 3.12 spams deprecation warnings about utcnow, fix all of them", "H"),
            ("replace os.path usage with pathlib", "T", "different mechanical replacement"),
            ("why do our timestamps show up an hour off in the UI", "S", "timezone bug, not the deprecation sweep"),
            ("naive vs aware datetimes?", "U"),
        ],
    ),
    (
        "Find the Go function that loads the YAML config (LoadConfig) and list which fields have default values.",
        [
            ("what config fields have defaults in LoadConfig", "P"),
            ("where's the yaml config parsed and which keys are optional with a fallback", "H"),
            ("add a log_level field to the config", "S", "changing the config struct"),
            ("LoadConfig panics on an empty file", "S", "bug in the same function"),
            (
                "which flags does the serve command accept and what are their defaults",
                "T",
                "different source of settings",
            ),
        ],
    ),
    (
        "Explain the database migration history: list the Alembic migrations in order and what each one changes.",
        [
            ("walk me through the alembic migrations", "P"),
            ("what did each db migration do, oldest first", "H"),
            ("create a migration adding an index on users.email", "S", "writing a migration"),
            ("downgrade the last migration", "S", "running a migration"),
            ("alembic vs django migrations", "U"),
        ],
    ),
]


def build(recipes):
    out = []
    for task, prompts in recipes:
        for item in prompts:
            prompt, code = item[0], item[1]
            same, note = NOTE[code]
            if len(item) > 2:
                note = f"{note} ({item[2]})"
            out.append({"task": task, "prompt": prompt, "same": same, "note": note})
    return out


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    for name, recipes in (("dev.json", DEV), ("heldout.json", HELDOUT)):
        with open(os.path.join(here, name), "w") as f:
            json.dump(build(recipes), f, indent=1, ensure_ascii=False)
            f.write("\n")
