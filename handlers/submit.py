"""The public submit function: Mangum over the submit app, built once per sandbox."""

from mangum import Mangum

from core.http.submit_app import create_submit_app
from core.outbox.wakeup import prepare_wakeup
from core.platform.services import Services
from core.platform.settings import production_settings

settings = production_settings()
services = Services.from_settings(settings, pool_max=2)
prepare_wakeup(services)
handler = Mangum(create_submit_app(services), lifespan="off")
