"""First messages of the latent intents in other languages than English (pure data).

German, French and Spanish for almost every intent; Portuguese, Japanese,
Arabic and Dutch for a few of the frequent ones. A conversation whose
language has no phrasing for its intent writes in English, as real users of
a service that answers in English often do. Decision D-SANDBOX-INTENTS.
"""

from __future__ import annotations

PHRASINGS_INTL: dict[str, dict[str, tuple[str, ...]]] = {
    "export_csv": {
        "de": (
            "Kann ich Berichte als CSV exportieren?",
            "wie lade ich die Gesprächsdaten als Excel runter",
            "CSV-Export liefert nur 100 Zeilen?",
            "Wo finde ich den Export-Button für die Auswertungen",
        ),
        "fr": (
            "Est-ce qu'on peut exporter les rapports en CSV ?",
            "comment télécharger les conversations en fichier excel",
            "export csv possible ?",
        ),
        "es": (
            "¿Puedo exportar los informes a CSV?",
            "como descargo los datos en excel",
            "Necesito exportar las conversaciones del mes pasado",
        ),
        "pt": ("Dá pra exportar os relatórios em CSV?", "como baixo os dados em planilha"),
        "ja": ("CSVでエクスポートできますか？", "レポートをExcelでダウンロードしたい"),
        "ar": ("هل يمكنني تصدير التقارير بصيغة CSV؟",),
        "nl": ("Kan ik rapporten exporteren naar CSV?", "hoe download ik de gesprekken als excel"),
    },
    "crm_integration": {
        "de": (
            "Gibt es eine Salesforce-Integration?",
            "Können Leads direkt in HubSpot landen?",
            "wie verbinde ich unser CRM",
        ),
        "fr": (
            "Est-ce que ça s'intègre avec Salesforce ?",
            "les leads peuvent aller directement dans HubSpot ?",
        ),
        "es": ("¿Se integra con Salesforce?", "cómo conecto nuestro CRM"),
    },
    "api_rate_limits": {
        "de": ("Was sind die Rate Limits der API?", "wir bekommen ständig 429 von eurer API"),
        "fr": (
            "Quelles sont les limites de requêtes de l'API ?",
            "l'API nous renvoie des erreurs 429",
        ),
        "es": (
            "¿Cuál es el límite de peticiones de la API?",
            "la api nos devuelve 429 todo el rato",
        ),
    },
    "data_residency": {
        "de": (
            "Wo werden unsere Daten gespeichert? Bitte nur in der EU",
            "Bietet ihr Hosting in Deutschland an?",
            "DSGVO: gehen Daten in die USA?",
            "In welchem Rechenzentrum liegen die Daten",
        ),
        "fr": (
            "Où sont hébergées nos données ? Elles doivent rester en Europe",
            "hébergement des données en France possible ?",
            "RGPD : les données partent-elles aux États-Unis ?",
        ),
        "es": (
            "¿Dónde se almacenan nuestros datos?",
            "¿Los datos se quedan en la UE?",
            "necesitamos que los datos estén alojados en España",
        ),
        "pt": ("Onde ficam armazenados os nossos dados?", "vocês têm servidores no Brasil? LGPD"),
        "ja": ("データはどこに保存されていますか？", "日本国内のデータセンターを選べますか"),
        "ar": ("أين يتم تخزين بياناتنا؟",),
        "nl": ("Waar worden onze gegevens opgeslagen?", "blijft de data binnen de EU?"),
    },
    "accessibility": {
        "de": (
            "Ist das Chat-Widget barrierefrei?",
            "Unterstützt ihr Screenreader wie JAWS?",
            "BITV / WCAG Konformität?",
        ),
        "fr": (
            "Le widget de chat est-il accessible aux lecteurs d'écran ?",
            "conformité RGAA ?",
        ),
        "es": ("¿El widget es accesible para lectores de pantalla?", "¿cumplís con WCAG?"),
    },
    "voice_channel": {
        "de": (
            "Habt ihr auch einen Sprachassistenten fürs Telefon?",
            "kann der Bot auch Anrufe annehmen",
        ),
        "fr": (
            "Avez-vous un assistant vocal pour le téléphone ?",
            "le bot peut-il répondre aux appels ?",
        ),
        "es": ("¿Tenéis un asistente de voz para llamadas?", "el bot puede contestar el teléfono?"),
    },
    "competitor_migration": {
        "de": (
            "Wir wechseln von Zendesk, könnt ihr unsere alten Chats importieren?",
            "Migration von Intercom möglich?",
        ),
        "fr": (
            "Nous quittons Intercom, pouvez-vous importer notre historique ?",
            "migration depuis Zendesk ?",
        ),
        "es": (
            "Venimos de Zendesk, ¿podéis importar el historial?",
            "migrar desde Intercom es posible?",
        ),
    },
    "reset_password": {
        "de": (
            "Ich habe mein Passwort vergessen",
            "Passwort zurücksetzen geht nicht, keine Mail",
            "wie ändere ich mein Passwort",
            "Ich kann mich nicht mehr einloggen",
        ),
        "fr": (
            "J'ai oublié mon mot de passe",
            "Je n'arrive pas à me connecter depuis hier",
            "le lien de réinitialisation ne marche pas",
        ),
        "es": (
            "Olvidé mi contraseña",
            "No puedo iniciar sesión desde ayer",
            "no me llega el correo para restablecer la contraseña",
        ),
        "pt": ("Esqueci minha senha", "Não consigo acessar minha conta"),
        "ja": ("パスワードを忘れました", "ログインできません"),
        "ar": ("لا أستطيع تسجيل الدخول إلى حسابي", "نسيت كلمة المرور"),
        "nl": ("Ik kan niet inloggen", "wachtwoord vergeten, reset mail komt niet aan"),
    },
    "two_factor_reset": {
        "de": (
            "Wie setze ich die Zwei-Faktor-Authentifizierung zurück?",
            "neues Handy, 2FA Code funktioniert nicht mehr",
        ),
        "fr": (
            "Comment réinitialiser la double authentification ?",
            "j'ai perdu mon téléphone, je ne reçois plus le code",
        ),
        "es": (
            "¿Cómo restablezco la verificación en dos pasos?",
            "perdí el móvil y no tengo el código 2FA",
        ),
    },
    "sso_setup": {
        "de": (
            "Wie richte ich SSO mit Azure AD ein?",
            "Unterstützt ihr SAML Single Sign-on?",
            "Login über unser Firmenkonto (Okta) möglich?",
        ),
        "fr": ("Comment configurer le SSO avec Okta ?", "vous supportez SAML ?"),
        "es": (
            "¿Cómo configuro el inicio de sesión único (SSO)?",
            "¿soportáis SAML con Azure AD?",
        ),
    },
    "dashboard_not_loading": {
        "de": (
            "Das Dashboard lädt nicht mehr.",
            "Ich bekomme ständig Fehler 500 beim Öffnen der Berichte",
            "Seite bleibt weiß nach dem Login",
        ),
        "fr": ("Le tableau de bord ne se charge plus", "page blanche après connexion"),
        "es": ("El panel no carga desde esta mañana", "me sale una pantalla en blanco"),
        "pt": ("O painel não carrega", "tela branca depois do login"),
        "ja": ("ダッシュボードが表示されません", "画面が真っ白になります"),
        "ar": ("لوحة التحكم لا تعمل منذ الصباح",),
        "nl": ("Het dashboard laadt niet", "wit scherm na het inloggen"),
    },
    "upload_error": {
        "de": (
            "Beim Hochladen von Dateien kommt Fehler 502",
            "PDF lässt sich nicht in die Wissensdatenbank hochladen",
        ),
        "fr": ("Erreur lors de l'envoi d'un fichier PDF", "impossible d'importer nos documents"),
        "es": ("Error al subir archivos", "no puedo subir el PDF a la base de conocimiento"),
    },
    "mobile_app_crash": {
        "de": ("Die iPhone-App stürzt ständig ab", "App startet nach dem Update nicht mehr"),
        "fr": ("L'application plante au démarrage", "l'appli android se ferme toute seule"),
        "es": (
            "La app se cierra sola al abrir un chat",
            "la aplicación se bloquea desde la actualización",
        ),
    },
    "plan_prices": {
        "de": (
            "Was kostet der Business-Tarif pro Nutzer?",
            "Preise?",
            "Wie teuer ist das für 10 Leute",
        ),
        "fr": (
            "Quel est le prix de l'offre Pro ?",
            "combien ça coûte par mois",
            "tarifs pour 10 utilisateurs ?",
        ),
        "es": ("¿Cuánto cuesta el plan Business?", "precio por usuario?", "cuánto sale al mes"),
        "pt": ("Quanto custa o plano Pro por usuário?", "qual o preço mensal"),
        "ja": ("ビジネスプランの料金はいくらですか？", "1ユーザーあたりの価格を教えてください"),
        "ar": ("كم سعر الخطة الاحترافية؟", "ما هي الأسعار؟"),
        "nl": ("Wat kost het Pro-abonnement?", "prijs per gebruiker?"),
    },
    "annual_discount": {
        "de": ("Gibt es einen Rabatt bei jährlicher Zahlung?", "Was kostet Pro im Jahresabo"),
        "fr": ("Avez-vous une offre annuelle ?", "réduction si on paie à l'année ?"),
        "es": ("¿Hay descuento por pago anual?", "precio del plan anual"),
    },
    "nonprofit_discount": {
        "de": ("Gibt es Rabatte für Schulen?", "Vergünstigung für gemeinnützige Vereine?"),
        "fr": ("Tarif association ?", "réduction pour les écoles ou universités ?"),
        "es": ("¿Tenéis descuento para ONG?", "precio especial para educación?"),
    },
    "free_trial": {
        "de": ("Gibt es eine kostenlose Testphase?", "Kann ich die Testversion verlängern?"),
        "fr": ("Y a-t-il un essai gratuit ?", "mon essai est terminé, je peux le prolonger ?"),
        "es": ("¿Hay prueba gratuita?", "se puede ampliar el periodo de prueba?"),
    },
    "double_charge": {
        "de": (
            "Ich wurde diesen Monat doppelt belastet",
            "zwei gleiche Abbuchungen auf meiner Kreditkarte",
        ),
        "fr": ("J'ai été facturé deux fois ce mois-ci", "double prélèvement sur ma carte"),
        "es": ("Me habéis cobrado dos veces este mes", "cargo duplicado en mi tarjeta"),
    },
    "invoice_copy": {
        "de": (
            "Können Sie mir die Rechnungen vom letzten Quartal schicken?",
            "Rechnung mit unserer USt-IdNr. bitte",
            "wo kann ich Rechnungen herunterladen",
        ),
        "fr": ("Où télécharger mes factures ?", "il me faut une facture avec notre numéro de TVA"),
        "es": ("¿Dónde descargo las facturas?", "necesito una copia de la factura de marzo"),
    },
    "update_card": {
        "de": ("Wie ändere ich meine Kreditkarte?", "Karte abgelaufen, wo trage ich die neue ein"),
        "fr": (
            "Comment changer ma carte bancaire ?",
            "paiement refusé, comment mettre à jour ma carte",
        ),
        "es": ("¿Cómo cambio la tarjeta de crédito?", "mi tarjeta caducó, dónde pongo la nueva"),
    },
    "book_demo": {
        "de": (
            "Wir hätten gern eine Demo für unser Team.",
            "Kann uns jemand das Produkt zeigen?",
            "Demo-Termin nächste Woche möglich?",
        ),
        "fr": ("Pouvons-nous avoir une démo pour notre équipe ?", "je voudrais réserver une démo"),
        "es": (
            "Queremos una demo para el equipo",
            "¿podemos agendar una demostración la semana que viene?",
        ),
        "pt": ("Gostaria de agendar uma demonstração", "vocês fazem demo para a equipe?"),
        "ja": ("デモを予約したいです", "製品のデモを見せていただけますか"),
        "ar": ("أود حجز عرض توضيحي لفريقي",),
        "nl": ("We willen graag een demo voor ons team",),
    },
    "onboarding_training": {
        "de": ("Bietet ihr Onboarding oder Schulungen an?", "gibt es Webinare zur Einrichtung"),
        "fr": ("Proposez-vous des formations pour nos agents ?", "comment se passe l'onboarding ?"),
        "es": ("¿Ofrecéis formación para nuestro equipo?", "cómo es el onboarding"),
    },
    "upgrade_plan": {
        "de": ("Wie upgrade ich auf Pro?", "Wir wollen heute auf Enterprise wechseln"),
        "fr": ("Comment passer à l'offre supérieure ?", "on veut passer en Enterprise"),
        "es": ("¿Cómo paso al plan Pro?", "queremos mejorar al plan Enterprise hoy"),
    },
    "buy_licenses": {
        "de": ("Wir möchten 25 Lizenzen kaufen", "noch 10 Nutzer dazubuchen"),
        "fr": ("Nous voulons acheter 25 licences", "ajouter des utilisateurs à notre abonnement"),
        "es": ("Queremos comprar 10 licencias", "añadir más usuarios a la suscripción"),
    },
    "pay_by_invoice": {
        "de": (
            "Können wir per Rechnung statt Kreditkarte zahlen?",
            "Zahlung per Überweisung möglich?",
        ),
        "fr": ("Peut-on payer par virement ?", "paiement sur facture possible ?"),
        "es": ("¿Podemos pagar por transferencia?", "pago contra factura?"),
    },
    "cancel_subscription": {
        "de": (
            "Wie kündige ich mein Abo?",
            "Bitte Vertrag kündigen",
            "automatische Verlängerung abstellen",
        ),
        "fr": ("Comment résilier mon abonnement ?", "je veux annuler mon abonnement"),
        "es": ("¿Cómo cancelo mi suscripción?", "quiero darme de baja"),
        "pt": ("Como cancelo minha assinatura?", "quero cancelar o plano"),
        "ja": ("サブスクリプションを解約したいです",),
        "ar": ("كيف ألغي اشتراكي؟",),
        "nl": ("Hoe zeg ik mijn abonnement op?",),
    },
    "delete_account": {
        "de": ("Bitte löschen Sie mein Konto und alle Daten", "Recht auf Löschung nach DSGVO"),
        "fr": ("Supprimez mon compte et mes données svp", "droit à l'oubli"),
        "es": (
            "Quiero borrar mi cuenta y todos mis datos",
            "solicitud de supresión de datos (RGPD)",
        ),
    },
    "refund_status": {
        "de": ("Ich warte seit zwei Wochen auf meine Rückerstattung", "wo bleibt mein Geld?"),
        "fr": (
            "J'attends mon remboursement depuis 15 jours",
            "toujours pas remboursé, c'est inadmissible",
        ),
        "es": ("Llevo dos semanas esperando el reembolso", "dónde está mi devolución??"),
    },
    "sync_failures": {
        "de": (
            "Schon wieder ausgefallen. Sehr ärgerlich!",
            "Die Synchronisierung schlägt ständig fehl",
        ),
        "fr": (
            "Encore une panne cette semaine, c'est inacceptable",
            "la synchro échoue tous les matins",
        ),
        "es": ("Otra caída del servicio, inaceptable", "la sincronización falla otra vez"),
    },
    "support_unresponsive": {
        "de": ("Euer Support antwortet nie", "seit einer Woche keine Antwort auf mein Ticket"),
        "fr": ("Votre support ne répond jamais", "aucune réponse à mon ticket depuis une semaine"),
        "es": ("Vuestro soporte nunca contesta", "llevo una semana sin respuesta"),
    },
    "reseller_program": {
        "de": (
            "Habt ihr ein Partnerprogramm für Agenturen?",
            "Wir möchten euer Produkt weiterverkaufen",
        ),
        "fr": (
            "Avez-vous un programme partenaire ?",
            "nous sommes une agence, peut-on revendre votre solution ?",
        ),
        "es": ("¿Tenéis programa de partners?", "somos una agencia y queremos revender"),
    },
    "greeting": {
        "de": ("Hallo", "hallo?", "Guten Tag"),
        "fr": ("Bonjour", "salut"),
        "es": ("Hola", "buenas"),
        "pt": ("Olá", "oi"),
        "ja": ("こんにちは",),
        "ar": ("مرحبا",),
        "nl": ("Hallo", "goedemiddag"),
    },
    "bot_or_human": {
        "de": ("Bist du ein Bot?", "rede ich mit einem Menschen?"),
        "fr": ("Vous êtes un robot ?", "je parle à une vraie personne ?"),
        "es": ("¿Eres un bot?", "hablo con una persona real?"),
    },
    "opening_hours": {
        "de": ("Wann seid ihr erreichbar?", "Öffnungszeiten vom Support?"),
        "fr": ("Quels sont vos horaires ?", "le support est ouvert le week-end ?"),
        "es": ("¿Cuál es vuestro horario de atención?", "abrís los fines de semana?"),
    },
}
